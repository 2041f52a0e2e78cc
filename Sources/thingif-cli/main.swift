import ArgumentParser
// thingif: the app side of a Thing Interaction Framework at a terminal.
