# SPDX-License-Identifier: Apache-2.0

# Cross-builds libthingif (.so, .a) and aircon for 32-bit ARM Linux boards
# with hardware floating point (armv7-a, Debian's armhf: Raspberry Pi OS
# 32-bit, i.MX 6/7, BeagleBone, OpenWrt's armv7 targets with glibc) with
# Embedded Swift: no Swift runtime on the board. `Int` is 32 bits there.
#
#   bash scripts/cross-sysroot.sh armhf            # build/sysroot-armhf
#   cmake -G Ninja -S . -B build-armv7 -DCMAKE_BUILD_TYPE=Release \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/arm-linux-gnueabihf.cmake
#   cmake --build build-armv7
#
# The Swift toolchain ships the Embedded stdlib for armv7-none-none-eabi
# only, whose default is the soft-float calling convention (doubles in core
# registers). gnueabihf passes them in VFP registers, so the Swift code is
# compiled with -mfloat-abi=hard (clang's option, which Swift's code
# generation follows: the objects carry Tag_ABI_VFP_args) and for Debian's
# armhf baseline, armv7-a with VFPv3-D16 and Thumb-2. A mismatch would link
# and then pass garbage for every double argument at run time.
set(THINGIF_CROSS_GNU_TRIPLE arm-linux-gnueabihf)
set(THINGIF_CROSS_DEBIAN_ARCH armhf)
set(THINGIF_CROSS_PROCESSOR armv7l)
set(THINGIF_CROSS_SWIFT_TARGET armv7-none-none-eabi)
set(THINGIF_CROSS_QEMU qemu-arm)
set(THINGIF_CROSS_SWIFT_CC_FLAGS -mfloat-abi=hard -mfpu=vfpv3-d16 -mthumb)
include(${CMAKE_CURRENT_LIST_DIR}/linux-common.cmake)
