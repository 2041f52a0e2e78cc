SUMMARY = "libthingif: the thing side of a Thing Interaction Framework (C API)"
DESCRIPTION = "libthingif onboards a device, receives commands over MQTT 5, \
runs their actions, reports results and state. Its core is Embedded Swift \
behind a C ABI: the library needs no Swift runtime on the board, only libc, \
libmosquitto, libjansson and libcrypto. This recipe builds it from source and needs a \
Swift 6 toolchain on the build host (THINGIF_SWIFT_TOOLCHAIN); without one, \
use thingif-prebuilt (PREFERRED_PROVIDER_thingif = \"thingif-prebuilt\")."
HOMEPAGE = "https://github.com/thingif/thingif"
SECTION = "libs"
# Apache-2.0 (LICENSE; NOTICE names what the binaries link under other
# terms). scripts/check-license.sh keeps these checksums equal to the files'.
LICENSE = "Apache-2.0"
LIC_FILES_CHKSUM = "file://LICENSE;md5=3b83ef96387f14655fc854ddc3c6bd57 \
                    file://NOTICE;md5=915f9d7e26fdd5255d5c451c0f85700c"

DEPENDS = "mosquitto jansson openssl"

# Your copy of the repository and the commit to build.
THINGIF_GIT_URI ?= "git://github.com/thingif/thingif.git;protocol=https;branch=main"
SRC_URI = "${THINGIF_GIT_URI}"
SRCREV ?= "${AUTOREV}"
S = "${WORKDIR}/git"

inherit cmake pkgconfig

# The Swift toolchain (its folder holding usr/bin/swiftc), outside the
# build: Yocto has no Swift recipe for Embedded Swift. Set it in local.conf.
THINGIF_SWIFT_TOOLCHAIN ??= ""

# libthingif's own toolchain files compile the Swift code for the bare-metal
# triple of the CPU against this recipe's sysroot and link with the target
# gcc; they replace the one cmake.bbclass writes (the later
# -DCMAKE_TOOLCHAIN_FILE wins), keeping its compiler and sysroot.
THINGIF_TOOLCHAIN = ""
THINGIF_TOOLCHAIN:aarch64 = "aarch64-linux-gnu"
THINGIF_TOOLCHAIN:arm = "arm-linux-gnueabihf"
COMPATIBLE_HOST = "(aarch64|arm).*-linux.*"

python () {
    if not d.getVar('THINGIF_SWIFT_TOOLCHAIN'):
        raise bb.parse.SkipRecipe("thingif builds from source only with a Swift 6 toolchain: set "
                                  "THINGIF_SWIFT_TOOLCHAIN, or use thingif-prebuilt (PREFERRED_PROVIDER_thingif)")
    if d.getVar('TARGET_ARCH') == 'arm' and 'callconvention-hard' not in (d.getVar('TUNE_FEATURES') or '').split():
        raise bb.parse.SkipRecipe("thingif on 32-bit ARM is built for the hard-float ABI (gnueabihf) only")
}

OECMAKE_GENERATOR = "Ninja"
EXTRA_OECMAKE = " \
    -DCMAKE_TOOLCHAIN_FILE=${S}/cmake/toolchains/${THINGIF_TOOLCHAIN}.cmake \
    -DTHINGIF_SYSROOT=${STAGING_DIR_TARGET} \
    -DCMAKE_C_COMPILER=${TARGET_PREFIX}gcc \
    -DCMAKE_Swift_COMPILER=${THINGIF_SWIFT_TOOLCHAIN}/usr/bin/swiftc \
    -DCMAKE_BUILD_TYPE=Release \
"

# No tests run in bitbake: scripts/test-cross.sh runs the C tests for
# both architectures under qemu-user.

# libthingif.a (Embedded Swift, links with cc alone) goes to -staticdev.
FILES:${PN}-dev += "${libdir}/cmake/thingif"
