SUMMARY = "libthingif, prebuilt for the board (no Swift toolchain in the build)"
DESCRIPTION = "Installs a libthingif that was cross-built elsewhere \
(deploy/make-prebuilt.sh ARCH: cmake with cmake/toolchains/<arch>.cmake, \
then cmake --install --prefix /usr, packed as \
thingif-<version>-<arch>.tar.gz): libthingif.so, libthingif.a, thingif.h, \
thingif.pc, the CMake package, LICENSE and NOTICE. The library needs no \
Swift runtime."
SECTION = "libs"
# Apache-2.0. The tarball carries LICENSE and NOTICE where cmake --install
# puts them; scripts/check-license.sh keeps these checksums equal to the
# files'.
LICENSE = "Apache-2.0"
LIC_FILES_CHKSUM = "file://usr/share/doc/thingif/LICENSE;md5=3b83ef96387f14655fc854ddc3c6bd57 \
                    file://usr/share/doc/thingif/NOTICE;md5=915f9d7e26fdd5255d5c451c0f85700c"

PROVIDES = "thingif"
RPROVIDES:${PN} = "thingif"
DEPENDS = "mosquitto jansson openssl"
RDEPENDS:${PN} = "mosquitto jansson libcrypto"

# One tarball per architecture, made by deploy/make-prebuilt.sh ARCH: the
# tree of `cmake --install --prefix /usr`, architecture in the name.
THINGIF_PREBUILT_ARCH = ""
THINGIF_PREBUILT_ARCH:aarch64 = "aarch64"
THINGIF_PREBUILT_ARCH:arm = "armv7"
COMPATIBLE_HOST = "(aarch64|arm).*-linux.*"
THINGIF_PREBUILT_URI ??= "file://thingif-${PV}-${THINGIF_PREBUILT_ARCH}.tar.gz"
SRC_URI = "${THINGIF_PREBUILT_URI};subdir=prebuilt"
S = "${WORKDIR}/prebuilt"

inherit pkgconfig

do_configure[noexec] = "1"
do_compile[noexec] = "1"

do_install() {
    install -d ${D}${libdir} ${D}${includedir} ${D}${libdir}/pkgconfig ${D}${libdir}/cmake/thingif
    cp -R --no-dereference --preserve=mode,links ${S}/usr/lib/libthingif.so* ${D}${libdir}/
    install -m 0644 ${S}/usr/lib/libthingif.a ${D}${libdir}/
    install -m 0644 ${S}/usr/include/thingif.h ${D}${includedir}/
    install -m 0644 ${S}/usr/lib/pkgconfig/thingif.pc ${D}${libdir}/pkgconfig/
    install -m 0644 ${S}/usr/lib/cmake/thingif/*.cmake ${D}${libdir}/cmake/thingif/
}

FILES:${PN}-dev += "${libdir}/cmake/thingif"
# Built and stripped elsewhere, with its own flags.
INSANE_SKIP:${PN} += "already-stripped ldflags"
