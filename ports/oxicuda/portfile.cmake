# Builds oxicuda with its meson build, from one of two sources:
#  - in a checkout (ports/oxicuda of this repository, used as an overlay
#    port): the source tree around it (../..). vcpkg does not track changes
#    to it: `vcpkg remove oxicuda` and install with --no-binarycaching.
#  - anywhere else (the port copied into a registry): the GitHub release
#    archive of the tag v<version in vcpkg.json>, checked against SHA512.
# tests/vcpkg runs this file under a harness of the vcpkg helpers it calls,
# both ways.

set(VCPKG_BUILD_TYPE release) # header-only port: one configuration is all there is

if(EXISTS "${CMAKE_CURRENT_LIST_DIR}/../../include/oxicuda/core/config.hpp")
    get_filename_component(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
else()
    vcpkg_from_github(
        OUT_SOURCE_PATH SOURCE_PATH
        REPO oxicuda/oxicuda
        REF "v${VERSION}"
        # No release is published yet: vcpkg's placeholder, which makes the
        # install fail and print the archive's SHA512 to put here.
        SHA512 0
        HEAD_REF main
    )
endif()

vcpkg_configure_meson(
    SOURCE_PATH "${SOURCE_PATH}"
    OPTIONS
        -Dtests=false
        -Dexamples=false
        -Dbench=false
)
vcpkg_install_meson()

# meson installs the CMake package to lib/cmake/oxicuda; vcpkg wants share/oxicuda.
vcpkg_cmake_config_fixup(CONFIG_PATH lib/cmake/oxicuda)

# The .pc names no library of ours, so it goes to share/pkgconfig: a
# release-only port has no debug/lib/pkgconfig, and vcpkg's debug builds
# search debug/lib/pkgconfig and share/pkgconfig only. Post-build lint allows
# share/pkgconfig only for a .pc without libraries: where meson puts -ldl in
# Libs (glibc before 2.34), it stays in lib/pkgconfig.
file(STRINGS "${CURRENT_PACKAGES_DIR}/lib/pkgconfig/oxicuda.pc" pc_libs REGEX "^Libs[^:]*: *[^ ]")
if(NOT pc_libs)
    file(MAKE_DIRECTORY "${CURRENT_PACKAGES_DIR}/share/pkgconfig")
    file(RENAME "${CURRENT_PACKAGES_DIR}/lib/pkgconfig/oxicuda.pc" "${CURRENT_PACKAGES_DIR}/share/pkgconfig/oxicuda.pc")
    file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/lib") # emptied; lint rejects empty directories
endif()
vcpkg_fixup_pkgconfig()

vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")
file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
