#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0

# Builds the libFuzzer targets of fuzz/ into .build-fuzz/: the device core
# (Sources/ThingIF) once as one instrumented object with
# -sanitize=fuzzer,address, then each fuzz/<target>.swift linked against it
# with libFuzzer's main. Hub files a target needs are listed in HUB_FILES.
# swiftc directly, not SwiftPM: SwiftPM links its own main into executables
# and would build the hub's whole dependency tree (NIO, Hummingbird) with
# coverage instrumentation.
#
# usage: fuzz/build.sh [TARGET...]   (default: every fuzz/*.swift)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/opt/swift/usr/bin:$PATH
out=.build-fuzz
mkdir -p "$out"
san=(-sanitize=fuzzer,address)
common=(-swift-version 5 -O -g -parse-as-library -I Sources/CThingIF $(pkg-config --cflags libmosquitto jansson | sed 's/-I/-Xcc -I/g'))

# The hub's pure files a target compiles in (they import only ThingIF).
hub_files() {
    case "$1" in
        state_merge) echo Sources/ThingIFHub/Store/StateMerge.swift ;;
        trigger_rules) echo Sources/ThingIFRules/*.swift ;;
        trait_definition) echo Sources/ThingIFRules/*.swift ;;
        command_form) echo Sources/ThingIFHub/HubError.swift Sources/ThingIFHub/Limits.swift Sources/ThingIFHub/App/CommandForm.swift ;;
        onboarding_form)
            echo Sources/ThingIFHub/HubError.swift Sources/ThingIFHub/Limits.swift Sources/ThingIFHub/App/FormFields.swift \
                Sources/ThingIFHub/App/OnboardingForm.swift
            ;;
        end_node_onboarding_form)
            echo Sources/ThingIFHub/HubError.swift Sources/ThingIFHub/Limits.swift Sources/ThingIFHub/App/FormFields.swift \
                Sources/ThingIFHub/App/OnboardingForm.swift Sources/ThingIFHub/App/EndNodeOnboardingForm.swift
            ;;
        state_query)
            echo Sources/ThingIFHub/HubError.swift Sources/ThingIFHub/Limits.swift Sources/ThingIFHub/App/FormFields.swift \
                Sources/ThingIFHub/App/StateQueryForm.swift Sources/ThingIFRules/*.swift
            ;;
        trigger_form)
            echo Sources/ThingIFHub/HubError.swift Sources/ThingIFHub/Limits.swift Sources/ThingIFHub/App/CommandForm.swift \
                Sources/ThingIFHub/Automation/TriggerForm.swift Sources/ThingIFRules/*.swift
            ;;
    esac
}

mapfile -t core < <(find Sources/ThingIF -name '*.swift' | sort)
stamp=$out/ThingIF.o
if [ ! -f "$stamp" ] || [ -n "$(find Sources/ThingIF -newer "$stamp" -print -quit)" ]; then
    echo "fuzz: building the instrumented core ($out/ThingIF.o)"
    swiftc "${common[@]}" "${san[@]}" -enable-testing -module-name ThingIF -whole-module-optimization \
        -emit-module -emit-module-path "$out/ThingIF.swiftmodule" -c -o "$out/ThingIF.o" "${core[@]}"
fi

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for f in fuzz/*.swift; do
        b=$(basename "$f" .swift)
        [ "$b" = "FuzzSupport" ] || targets+=("$b")
    done
fi
for t in "${targets[@]}"; do
    src=fuzz/$t.swift
    [ -f "$src" ] || { echo "fuzz: no target $t (fuzz/$t.swift)" >&2; exit 2; }
    bin=$out/fuzz-$t
    extra=$(hub_files "$t")
    if [ ! -f "$bin" ] || [ -n "$(find "$src" fuzz/FuzzSupport.swift $extra "$out/ThingIF.o" -newer "$bin" -print -quit)" ]; then
        echo "fuzz: building $bin"
        swiftc "${common[@]}" "${san[@]}" -use-ld=lld -I "$out" -module-name "Fuzz_$t" -o "$bin" \
            "$src" fuzz/FuzzSupport.swift $extra "$out/ThingIF.o" \
            $(pkg-config --libs libmosquitto jansson)
    fi
done
