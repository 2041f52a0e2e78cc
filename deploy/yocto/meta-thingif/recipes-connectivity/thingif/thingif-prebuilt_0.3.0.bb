SUMMARY = "libthingif, prebuilt for the board (no Swift toolchain in the build)"
DESCRIPTION = "Installs a libthingif that was cross-built elsewhere \
(deploy/make-prebuilt.sh ARCH: cmake with cmake/toolchains/<arch>.cmake, \
then cmake --install --prefix /usr, packed as \
thingif-<version>-<arch>.tar.gz): libthingif.so, libthingif.a, thingif.h, \
thingif.pc and the CMake package. The library needs no Swift runtime."
SECTION = "libs"
LICENSE = "CLOSED"

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
