// The REST API of thingif-hub (Hummingbird). See docs/openapi.yaml.
