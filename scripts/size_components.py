#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""What each part of libthingif costs in the stripped library (scripts/size.sh).

Reads the symbol table of an unstripped Release libthingif.so (llvm-nm -S),
demangles the names (swift-demangle) and gives each function and datum to
the source file that declares it:
  - a method, initializer, accessor, closure, specialization or outlined
    copy of a thingif type goes to the file that declares that member of
    the type (the type's own file, or the file of the extension that
    declares it), else to the type's file;
  - a C function (thingif_*) and a module-level function or global to the
    file that declares it;
  - specializations of the standard library's generics for thingif's types
    go to "Swift standard library" (they are the cost of using Array,
    Dictionary, String, … at all), as do the library's and runtime's own
    functions;
  - the machine outliner's shared sequences (OUTLINED_FUNCTION_n) go to
    "machine outliner": they are code that several functions share.
The rest of the stripped file (ELF headers, the dynamic symbol table,
relocations, alignment) is printed as "ELF structure". Sizes are the
symbols' st_size, so the figures are the code and data the linker kept
after --gc-sections. The attribution is by name: it is exact for what a
file declares, an estimate where a member's name is declared in several
files.

usage: size_components.py --lib LIB --stripped BYTES --sources DIR [--nm NM]
                          [--demangle SWIFT_DEMANGLE] [--files N]
"""

import argparse
import collections
import os
import re
import subprocess
import sys

STDLIB = "Swift standard library"
OUTLINER = "machine outliner"
OTHER = "other (C runtime, unnamed)"
C_SHIMS = "Sources/CThingIF (static C shims of crypto.h, shim.h)"

DECL = re.compile(r"\b(struct|enum|class|actor|protocol|typealias)\s+([A-Za-z_][A-Za-z0-9_]*)")
EXTENSION = re.compile(r"\bextension\s+([A-Za-z_][A-Za-z0-9_.]*)")
MEMBER = re.compile(
    r"\b(?:func|var|let|case)\s+(?:`)?([A-Za-z_][A-Za-z0-9_]*)|\b(init|deinit|subscript)\b")


class SourceIndex:
    """Which file declares which type, extends which type, names which member."""

    def __init__(self, root):
        self.type_file = {}
        self.extends = collections.defaultdict(set)
        self.members = collections.defaultdict(set)
        self.files = []
        for folder, _, names in os.walk(root):
            for name in sorted(names):
                if not name.endswith(".swift"):
                    continue
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, os.path.dirname(root))
                self.files.append(rel)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                for _, type_name in DECL.findall(text):
                    self.type_file.setdefault(type_name, rel)
                    self.extends[type_name].add(rel)
                for extended in EXTENSION.findall(text):
                    self.extends[extended.split(".")[-1]].add(rel)
                for func, special in MEMBER.findall(text):
                    self.members[func or special].add(rel)

    def file_of(self, types, member):
        """The file of member (or None) of the innermost declared type in types."""
        declared = [t for t in types if t in self.type_file]
        if member and not declared and self.members.get(member):
            return sorted(self.members[member])[0]
        if not declared:
            return None
        for type_name in reversed(declared):
            if member:
                both = self.extends[type_name] & self.members.get(member, set())
                if len(both) == 1:
                    return next(iter(both))
                if self.type_file[type_name] in both:
                    return self.type_file[type_name]
        return self.type_file[declared[0]]


PREFIXES = (
    "partial apply forwarder for ", "merged ", "outlined copy of ", "outlined consume of ",
    "outlined destroy of ", "outlined retain of ", "outlined release of ", "outlined init with take of ",
    "outlined init with copy of ", "outlined assign with take of ", "outlined assign with copy of ",
    "outlined enum tag store of ", "outlined variable #", "one-time initialization token for ",
    "one-time initialization function for ", "lazy protocol witness table cache variable for type ",
    "lazy protocol witness table accessor for type ", "protocol witness for ", "static ", "type metadata for ",
    "type metadata accessor for ", "nominal type descriptor for ", "full type metadata for ",
    "value witness table for ", "class metadata base offset for ", "reabstraction thunk helper from ",
    "outlined read-only object #0 of ", "dispatch thunk of ", "variable initialization expression of ", "default argument ",
    "key path getter for ", "unsafeMutableAddressor of ", "globalinit_",
)


def top_level_last_in(text):
    """The text after the last ' in ' that is outside brackets, or None."""
    depth, last = 0, None
    i = 0
    while i < len(text):
        c = text[i]
        if text.startswith("->", i):
            i += 2
            continue
        if c in "<([":
            depth += 1
        elif c in ">)]":
            depth -= 1
        elif depth == 0 and text.startswith(" in ", i):
            last = i + 4
        i += 1
    return text[last:] if last is not None else None


def primary_entity(name):
    """The entity a demangled symbol's code belongs to: 'ThingIF.Thing.connect', …"""
    text = name
    for _ in range(32):
        before = text
        for prefix in PREFIXES:
            if text.startswith(prefix):
                text = text[len(prefix):]
                if prefix == "outlined variable #":
                    text = re.sub(r"^\d+ of ", "", text)
        if re.match(r"(generic |function signature |generic partial )?specialization <", text):
            # The demangler leaves brackets of the parameters unclosed
            # ("[Closure Propagated : …, Argument Types : […]>"), so the
            # entity is what follows the first "> of ".
            end = text.find("> of ")
            if end < 0:
                break
            text = text[end + len("> of "):]
        elif re.match(r"(implicit )?closure #\d+|[A-Za-z_][A-Za-z0-9_]* #\d+ ", text):
            rest = top_level_last_in(text)
            if rest is None:
                break
            text = rest
        if text == before:
            break
    return text


def classify(entity, index):
    """(group, file or None) for a primary entity."""
    if entity.startswith("OUTLINED_FUNCTION"):
        return OUTLINER, None
    if entity.startswith("(extension in ThingIF):"):
        entity = entity[len("(extension in ThingIF):"):]
        head = re.match(r"[A-Za-z_.]+", entity)
        parts = head.group(0).split(".") if head else []
        rest = parts[1:] if parts and parts[0] == "Swift" else parts
        member = rest[-1] if rest and rest[-1][:1].islower() else None
        types = [p for p in rest if p[:1].isupper()]
        return "ThingIF", index.file_of(types, member)
    if not entity.startswith("ThingIF."):
        if re.match(r"(Swift\.|__C\.|_swift|swift_|\$s|\$e|_Concurrency|Builtin|\(extension in Swift\))", entity):
            return STDLIB, None
        if entity.startswith("thingif_"):
            # A merged function (LLVM's "Tm" suffix) is the C call's body.
            name = re.sub(r"Tm$", "", entity.split("(")[0])
            return ("ThingIF", index.file_of([], name)) if name in index.members else (C_SHIMS, None)
        # A tuple or optional of thingif types (an outlined copy of one).
        inner = re.search(r"ThingIF\.([A-Z][A-Za-z0-9_]*)", entity)
        if inner:
            return "ThingIF", index.file_of([inner.group(1)], None)
        return OTHER, None
    path = entity[len("ThingIF."):]
    # ThingIF.Thing.(reportConfig in _HASH)(…): a private member.
    private = re.match(r"((?:[A-Za-z_][A-Za-z0-9_]*\.)*)\(([A-Za-z_][A-Za-z0-9_]*) in _[0-9A-F]+\)", path)
    if private:
        parts = [p for p in private.group(1).split(".") if p] + [private.group(2)]
    else:
        head = re.match(r"[A-Za-z_][A-Za-z0-9_.]*", path)
        parts = head.group(0).split(".") if head else []
    parts = [p for p in parts if p not in ("getter", "setter", "modify", "_modify", "read", "unsafeAddressor",
                                           "__allocating_init", "__deallocating_deinit")]
    types = [p for p in parts if p[:1].isupper()]
    lower = [p for p in parts if not p[:1].isupper()]
    member = lower[0] if lower else None
    return "ThingIF", index.file_of(types, member)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lib", required=True)
    parser.add_argument("--stripped", type=int, required=True)
    parser.add_argument("--sources", required=True, nargs="+", help="Sources/ThingIF and Sources/ThingIFC")
    parser.add_argument("--nm", default="nm")
    parser.add_argument("--demangle", default="swift-demangle")
    parser.add_argument("--files", type=int, default=15, help="how many of the largest files to list")
    args = parser.parse_args()

    out = subprocess.run([args.nm, "-S", "--defined-only", args.lib], check=True, capture_output=True,
                         text=True).stdout
    symbols = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 4:
            symbols.append((int(fields[1], 16), fields[3]))
    demangled = subprocess.run([args.demangle], input="\n".join(n for _, n in symbols) + "\n", check=True,
                               capture_output=True, text=True).stdout.splitlines()
    if len(demangled) != len(symbols):
        sys.exit("size: swift-demangle returned %d lines for %d symbols" % (len(demangled), len(symbols)))

    indexes = [SourceIndex(os.path.abspath(s)) for s in args.sources]
    by_group = collections.Counter()
    by_file = collections.Counter()
    unplaced = collections.Counter()
    for (size, _), name in zip(symbols, demangled):
        entity = primary_entity(name)
        group, file = OTHER, None
        for index in indexes:
            group, file = classify(entity, index)
            if file:
                break
        if file:
            component = os.path.dirname(file) or file
            by_group[component] += size
            by_file[file] += size
        elif group == "ThingIF":
            by_group["ThingIF (file not found)"] += size
            unplaced[entity.split("(")[0]] += size
        else:
            by_group[group] += size
    named = sum(by_group.values())
    by_group["ELF structure (headers, dynamic symbols, relocations, alignment)"] = max(0, args.stripped - named)

    def row(label, size):
        print("  %-66s %9s B %5.1f %%" % (label, format(size, ","), 100.0 * size / args.stripped))

    print("by component (folder of Sources/):")
    for label, size in by_group.most_common():
        row(label, size)
    print("the %d largest files:" % args.files)
    for label, size in by_file.most_common(args.files):
        row(label, size)
    if unplaced:
        print("largest thingif code whose file was not found:")
        for label, size in unplaced.most_common(5):
            row(label[:66], size)


if __name__ == "__main__":
    main()
