# SPDX-License-Identifier: Apache-2.0

# The part of cmake/toolchains/<arch>.cmake that every Linux board shares;
# the per-architecture file sets THINGIF_CROSS_* and includes this one.
#
# How the board build works: Swift has no Linux target with an Embedded
# stdlib other than x86_64, so the Swift code is compiled for the bare-metal
# triple of the same CPU (THINGIF_CROSS_SWIFT_TARGET, for example
# aarch64-none-none-elf) with the board's glibc headers (-Xcc --sysroot,
# -D__linux__ so the headers take their Linux branches, -fPIC), and the
# objects are linked by the board's GNU C compiler (CMakeLists.txt does that
# when THINGIF_CROSS_SWIFT_TARGET is set). Embedded Swift code calls only C
# (libc, libmosquitto, libjansson), so the result is an ordinary Linux ELF
# file for the board.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR ${THINGIF_CROSS_PROCESSOR})
set(CMAKE_LIBRARY_ARCHITECTURE ${THINGIF_CROSS_GNU_TRIPLE})

# The sysroot: the board's root file system with libc6-dev,
# libmosquitto-dev and libjansson-dev (scripts/cross-sysroot.sh makes one
# from Debian's packages). Toolchain files are read again by try_compile, so
# the value is passed on through the environment.
if(NOT THINGIF_SYSROOT)
  if(DEFINED ENV{THINGIF_SYSROOT} AND NOT "$ENV{THINGIF_SYSROOT}" STREQUAL "")
    set(THINGIF_SYSROOT "$ENV{THINGIF_SYSROOT}")
  else()
    get_filename_component(THINGIF_SYSROOT
      "${CMAKE_CURRENT_LIST_DIR}/../../build/sysroot-${THINGIF_CROSS_DEBIAN_ARCH}" ABSOLUTE)
  endif()
endif()
set(THINGIF_SYSROOT "${THINGIF_SYSROOT}" CACHE PATH "The board's root file system (headers and libraries)")
set(ENV{THINGIF_SYSROOT} "${THINGIF_SYSROOT}")
if(NOT EXISTS "${THINGIF_SYSROOT}/usr/include/mosquitto.h")
  message(FATAL_ERROR "no ${THINGIF_SYSROOT}/usr/include/mosquitto.h: make the sysroot first "
    "(bash scripts/cross-sysroot.sh ${THINGIF_CROSS_DEBIAN_ARCH}) or pass -DTHINGIF_SYSROOT=DIR")
endif()
set(CMAKE_SYSROOT "${THINGIF_SYSROOT}")

if(NOT CMAKE_C_COMPILER)
  set(CMAKE_C_COMPILER ${THINGIF_CROSS_GNU_TRIPLE}-gcc)
endif()
if(NOT CMAKE_CXX_COMPILER)
  find_program(THINGIF_CROSS_CXX ${THINGIF_CROSS_GNU_TRIPLE}-g++)
  if(THINGIF_CROSS_CXX)
    set(CMAKE_CXX_COMPILER ${THINGIF_CROSS_CXX})
  endif()
endif()
set(CMAKE_Swift_COMPILER_TARGET ${THINGIF_CROSS_SWIFT_TARGET})
# CMake's check links a Swift program with swiftc, which has no linker for a
# bare-metal triple; the library's own link uses the C compiler.
set(CMAKE_Swift_COMPILER_WORKS TRUE)

set(_thingif_cc_flags --sysroot=${THINGIF_SYSROOT} -D__linux__ -D__unix__ -fPIC
  -isystem ${THINGIF_SYSROOT}/usr/include/${THINGIF_CROSS_GNU_TRIPLE}
  ${THINGIF_CROSS_SWIFT_CC_FLAGS})
set(_thingif_swift_flags "")
foreach(f IN LISTS _thingif_cc_flags)
  string(APPEND _thingif_swift_flags " -Xcc ${f}")
endforeach()
set(CMAKE_Swift_FLAGS_INIT "${_thingif_swift_flags}")

set(CMAKE_FIND_ROOT_PATH "${THINGIF_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
if(NOT DEFINED CMAKE_FIND_ROOT_PATH_MODE_PACKAGE)
  set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
endif()

# pkg-config reads the board's .pc files only, and prefixes their paths
# with the sysroot.
set(ENV{PKG_CONFIG_DIR} "")
set(ENV{PKG_CONFIG_LIBDIR}
  "${THINGIF_SYSROOT}/usr/lib/${THINGIF_CROSS_GNU_TRIPLE}/pkgconfig:${THINGIF_SYSROOT}/usr/lib/pkgconfig:${THINGIF_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${THINGIF_SYSROOT}")

# ctest runs the board's programs under qemu-user with the sysroot as their
# root (scripts/qemu-run.sh reads these).
find_program(THINGIF_CROSS_QEMU_BIN ${THINGIF_CROSS_QEMU})
if(THINGIF_CROSS_QEMU_BIN)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${THINGIF_CROSS_QEMU_BIN};-L;${THINGIF_SYSROOT}")
endif()
