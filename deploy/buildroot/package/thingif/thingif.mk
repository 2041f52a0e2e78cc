################################################################################
#
# thingif
#
################################################################################

THINGIF_VERSION = 0.4.0
THINGIF_LICENSE = Apache-2.0
THINGIF_INSTALL_STAGING = YES
THINGIF_DEPENDENCIES = mosquitto jansson openssl host-pkgconf

ifeq ($(BR2_aarch64),y)
THINGIF_ARCH = aarch64
THINGIF_TOOLCHAIN = aarch64-linux-gnu
else
THINGIF_ARCH = armv7
THINGIF_TOOLCHAIN = arm-linux-gnueabihf
endif

ifeq ($(BR2_PACKAGE_THINGIF_PREBUILT),y)

# deploy/make-prebuilt.sh ARCH makes this tarball: the tree of
# `cmake --install --prefix /usr` of a cross build (usr/lib, usr/include).
THINGIF_SITE = $(call qstrip,$(BR2_PACKAGE_THINGIF_PREBUILT_DIR))
THINGIF_SITE_METHOD = file
THINGIF_SOURCE = thingif-$(THINGIF_VERSION)-$(THINGIF_ARCH).tar.gz
THINGIF_STRIP_COMPONENTS = 0
# Where cmake --install put them in the tarball.
THINGIF_LICENSE_FILES = usr/share/doc/thingif/LICENSE usr/share/doc/thingif/NOTICE

define THINGIF_INSTALL_STAGING_CMDS
	cp -dpfr $(@D)/usr/include/thingif.h $(STAGING_DIR)/usr/include/
	cp -dpfr $(@D)/usr/lib/libthingif.so* $(@D)/usr/lib/libthingif.a $(STAGING_DIR)/usr/lib/
	$(INSTALL) -D -m 0644 $(@D)/usr/lib/pkgconfig/thingif.pc $(STAGING_DIR)/usr/lib/pkgconfig/thingif.pc
	mkdir -p $(STAGING_DIR)/usr/lib/cmake/thingif
	cp -dpfr $(@D)/usr/lib/cmake/thingif/*.cmake $(STAGING_DIR)/usr/lib/cmake/thingif/
endef

define THINGIF_INSTALL_TARGET_CMDS
	cp -dpfr $(@D)/usr/lib/libthingif.so* $(TARGET_DIR)/usr/lib/
endef

$(eval $(generic-package))

else

# Built from a local checkout with the host's Swift toolchain. thingif's own
# toolchain file compiles the Swift code for the bare-metal triple of the
# CPU against the staging folder and links with Buildroot's cross gcc; it
# replaces Buildroot's toolchain file (the later -DCMAKE_TOOLCHAIN_FILE
# wins), keeping Buildroot's compiler and sysroot.
THINGIF_SITE = $(call qstrip,$(BR2_PACKAGE_THINGIF_SOURCE_DIR))
THINGIF_SITE_METHOD = local
THINGIF_LICENSE_FILES = LICENSE NOTICE
THINGIF_CMAKE_BACKEND = ninja
THINGIF_CONF_OPTS = \
	-DCMAKE_TOOLCHAIN_FILE=$(@D)/cmake/toolchains/$(THINGIF_TOOLCHAIN).cmake \
	-DTHINGIF_SYSROOT=$(STAGING_DIR) \
	-DCMAKE_C_COMPILER=$(TARGET_CC) \
	-DCMAKE_Swift_COMPILER=$(call qstrip,$(BR2_PACKAGE_THINGIF_SWIFT_TOOLCHAIN))/usr/bin/swiftc \
	-DCMAKE_INSTALL_LIBDIR=lib

$(eval $(cmake-package))

endif
