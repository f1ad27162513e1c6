# Overlay port: builds oxicuda from the source tree this port lives in
# (ports/oxicuda -> ../..) with its meson build. vcpkg does not track changes
# to a local source tree: `vcpkg remove oxicuda` before installing it again.

# Header-only: one (release) configuration is all there is.
set(VCPKG_BUILD_TYPE release)

get_filename_component(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)

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
vcpkg_fixup_pkgconfig()

vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")
file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
