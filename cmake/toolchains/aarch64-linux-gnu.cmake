# SPDX-License-Identifier: Apache-2.0

# Cross-builds libthingif (.so, .a) and aircon for 64-bit ARM Linux boards
# (Raspberry Pi 3/4/5 on a 64-bit OS, i.MX 8, Jetson, …) with Embedded Swift:
# no Swift runtime on the board.
#
#   bash scripts/cross-sysroot.sh arm64            # build/sysroot-arm64
#   cmake -G Ninja -S . -B build-aarch64 -DCMAKE_BUILD_TYPE=Release \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
#   cmake --build build-aarch64
#
# Needs gcc-aarch64-linux-gnu (the C compiler and the linker driver) and a
# Swift 6 toolchain with the Embedded stdlib for aarch64-none-none-elf.
# THINGIF_SYSROOT (cache variable or environment) names another sysroot, for
# example a Yocto or Buildroot staging folder.
set(THINGIF_CROSS_GNU_TRIPLE aarch64-linux-gnu)
set(THINGIF_CROSS_DEBIAN_ARCH arm64)
set(THINGIF_CROSS_PROCESSOR aarch64)
set(THINGIF_CROSS_SWIFT_TARGET aarch64-none-none-elf)
set(THINGIF_CROSS_QEMU qemu-aarch64)
set(THINGIF_CROSS_SWIFT_CC_FLAGS "")
include(${CMAKE_CURRENT_LIST_DIR}/linux-common.cmake)
