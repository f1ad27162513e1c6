# A vcpkg port's portfile.cmake run without vcpkg, in CMake script mode:
#
#   cmake --warn-uninitialized -DPORT_DIR=<port> -DWORK_DIR=<empty dir> -P harness.cmake
#
# This file does what vcpkg's scripts/ports.cmake does before it includes a
# portfile (the variables a portfile sees, an x64-linux or arm64-linux
# triplet) and defines the vcpkg helpers our port calls, written after their
# sources in microsoft/vcpkg:
#
#   vcpkg_from_github                           scripts/cmake/vcpkg_from_github.cmake
#   vcpkg_configure_meson, vcpkg_install_meson  ports/vcpkg-tool-meson/
#   vcpkg_cmake_config_fixup                    ports/vcpkg-cmake-config/
#   vcpkg_fixup_pkgconfig                       scripts/cmake/vcpkg_fixup_pkgconfig.cmake
#   vcpkg_install_copyright                     scripts/cmake/vcpkg_install_copyright.cmake
#
# for the cases a header-only port built with meson on Linux meets; a part a
# helper has that is not written here stops with FATAL_ERROR instead of being
# skipped. Strictness: a helper given an argument it does not know stops with
# FATAL_ERROR (vcpkg_configure_meson itself ignores unknown ones); a vcpkg
# function not defined here is an unknown CMake command, which stops cmake.
# The installed tree is left in WORK_DIR/packages/<port>_<triplet>, where
# vcpkg's post-build checks would look at it (tests/vcpkg/port_test.py does).
#
# What stays unlike vcpkg: meson, ninja, pkg-config and the compiler are the
# ones on PATH (vcpkg pins its own meson, and passes the triplet's compiler
# and flags through the native file), the environment is not cleaned, and
# the installed tree of dependencies is empty.
cmake_minimum_required(VERSION 3.19)

foreach(required IN ITEMS PORT_DIR WORK_DIR)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "harness.cmake: -D${required}=... is required")
  endif()
endforeach()
if(NOT CMAKE_HOST_UNIX OR CMAKE_HOST_APPLE)
  message(FATAL_ERROR "harness.cmake emulates a Linux triplet only")
endif()

# --- what scripts/ports.cmake and the triplet give a portfile ---------------------
get_filename_component(CURRENT_PORT_DIR "${PORT_DIR}" ABSOLUTE)
get_filename_component(WORK_DIR "${WORK_DIR}" ABSOLUTE)
file(READ "${CURRENT_PORT_DIR}/vcpkg.json" z_manifest)
string(JSON PORT GET "${z_manifest}" name)
string(JSON VERSION GET "${z_manifest}" version)
set(FEATURES core)

execute_process(COMMAND uname -m OUTPUT_VARIABLE z_machine OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
if(z_machine MATCHES "x86_64|amd64")
  set(VCPKG_TARGET_ARCHITECTURE x64)
elseif(z_machine MATCHES "aarch64|arm64")
  set(VCPKG_TARGET_ARCHITECTURE arm64)
else()
  message(FATAL_ERROR "harness.cmake: no vcpkg Linux triplet for machine ${z_machine}")
endif()
# triplets/<arch>-linux.cmake
set(VCPKG_CRT_LINKAGE dynamic)
set(VCPKG_LIBRARY_LINKAGE static)
set(VCPKG_CMAKE_SYSTEM_NAME Linux)
set(TARGET_TRIPLET ${VCPKG_TARGET_ARCHITECTURE}-linux)
set(HOST_TRIPLET ${TARGET_TRIPLET})
# scripts/cmake/vcpkg_common_definitions.cmake, the part for a Linux target on a Linux host
set(VCPKG_TARGET_IS_LINUX ON)
set(VCPKG_HOST_IS_LINUX ON)
set(VCPKG_TARGET_EXECUTABLE_SUFFIX "")
set(VCPKG_HOST_EXECUTABLE_SUFFIX "")

set(DOWNLOADS "${WORK_DIR}/downloads")
set(CURRENT_BUILDTREES_DIR "${WORK_DIR}/buildtrees/${PORT}")
set(CURRENT_PACKAGES_DIR "${WORK_DIR}/packages/${PORT}_${TARGET_TRIPLET}")
set(CURRENT_INSTALLED_DIR "${WORK_DIR}/installed/${TARGET_TRIPLET}")
set(CURRENT_HOST_INSTALLED_DIR "${CURRENT_INSTALLED_DIR}")
file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}")
file(MAKE_DIRECTORY "${CURRENT_BUILDTREES_DIR}" "${CURRENT_PACKAGES_DIR}" "${CURRENT_INSTALLED_DIR}" "${DOWNLOADS}")

# ports.cmake warns when a portfile reads these (fails with
# _VCPKG_PROHIBIT_BACKCOMPAT_FEATURES): they do not say whether they mean the
# host or the target. The harness fails.
function(z_harness_ambiguous_variable variable access)
  if(access STREQUAL "READ_ACCESS")
    message(FATAL_ERROR "the portfile reads ${variable}; use VCPKG_TARGET_IS_<SYSTEM> or CMAKE_HOST_<SYSTEM>")
  endif()
endfunction()
foreach(z_var IN ITEMS ANDROID APPLE BSD IOS LINUX MINGW MSVC UNIX WIN32)
  variable_watch(${z_var} z_harness_ambiguous_variable)
endforeach()

# --- shared by the helpers ------------------------------------------------------------
# The caller's arguments left over by cmake_parse_arguments stop the run.
function(z_harness_no_extra_arguments function)
  if(DEFINED arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${function} was passed extra arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
endfunction()

# The caller used a keyword whose handling the harness does not implement.
function(z_harness_unimplemented function)
  foreach(keyword IN LISTS ARGN)
    if(DEFINED arg_${keyword})
      message(FATAL_ERROR "${function}(${keyword} ...) is not implemented by the harness")
    endif()
  endforeach()
endfunction()

# The short build-type names vcpkg builds (dbg, rel), in its order.
function(z_harness_build_types out)
  if(DEFINED VCPKG_BUILD_TYPE AND NOT VCPKG_BUILD_TYPE MATCHES "^(release|debug)$")
    message(FATAL_ERROR "VCPKG_BUILD_TYPE is '${VCPKG_BUILD_TYPE}': vcpkg knows release and debug")
  endif()
  set(types "")
  if(NOT VCPKG_BUILD_TYPE STREQUAL "release")
    list(APPEND types dbg)
  endif()
  if(NOT VCPKG_BUILD_TYPE STREQUAL "debug")
    list(APPEND types rel)
  endif()
  set(${out} ${types} PARENT_SCOPE)
endfunction()

function(z_harness_find_tool variable name)
  if(NOT ${variable})
    find_program(${variable} ${name} REQUIRED)
  endif()
endfunction()

# vcpkg_execute_required_process: run, keep the output as a log in the
# buildtree, stop on failure showing it.
function(z_harness_run logname directory)
  message(STATUS "${logname}: ${ARGN}")
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY "${directory}" RESULT_VARIABLE status
                  OUTPUT_VARIABLE output ERROR_VARIABLE output)
  file(WRITE "${CURRENT_BUILDTREES_DIR}/${logname}-out.log" "${output}")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "Command failed (${status}): ${ARGN}\nWorking directory: ${directory}\n${output}")
  endif()
endfunction()

# --- vcpkg_from_github (scripts/cmake/vcpkg_from_github.cmake) ------------------------------
# With no network: the archive must already be in DOWNLOADS under the name
# vcpkg gives it (<org>-<repo>-<ref>.tar.gz), where vcpkg_download_distfile
# takes a cached file from; its SHA512 is checked as vcpkg checks it. The
# archive is extracted under the buildtree, its one top-level directory
# stripped, as vcpkg_extract_source_archive does (its directory's name aside).
function(vcpkg_from_github)
  set(unimplemented GITHUB_HOST RAW_INCLUDE_MAPPING AUTHORIZATION_TOKEN FILE_DISAMBIGUATOR)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "OUT_SOURCE_PATH;REPO;REF;SHA512;HEAD_REF;${unimplemented}" "PATCHES")
  z_harness_no_extra_arguments(vcpkg_from_github)
  z_harness_unimplemented(vcpkg_from_github ${unimplemented} PATCHES)
  if(DEFINED arg_REF AND NOT DEFINED arg_SHA512)
    message(FATAL_ERROR "SHA512 must be specified if REF is specified.")
  endif()
  if(NOT DEFINED arg_REF)
    message(FATAL_ERROR "vcpkg_from_github without REF (a --head build) is not implemented by the harness")
  endif()
  if(NOT DEFINED arg_OUT_SOURCE_PATH)
    message(FATAL_ERROR "OUT_SOURCE_PATH must be specified.")
  endif()
  if(NOT arg_REPO MATCHES "^([^/]*)/([^/]*)$")
    message(FATAL_ERROR "REPO (${arg_REPO}) is not a valid repo name")
  endif()
  string(REPLACE "/" "_-" ref "${arg_REF}")
  set(archive "${DOWNLOADS}/${CMAKE_MATCH_1}-${CMAKE_MATCH_2}-${ref}.tar.gz")
  if(NOT EXISTS "${archive}")
    message(FATAL_ERROR "harness: no network; https://github.com/${arg_REPO}/archive/${arg_REF}.tar.gz "
                        "must be in the download cache as ${archive}")
  endif()
  file(SHA512 "${archive}" actual)
  if(NOT actual STREQUAL arg_SHA512)
    message(FATAL_ERROR "\nFile does not have expected hash:\n        File path: [ ${archive} ]\n"
                        "    Expected hash: [ ${arg_SHA512} ]\n      Actual hash: [ ${actual} ]\n")
  endif()
  set(source "${CURRENT_BUILDTREES_DIR}/src/${ref}.clean")
  set(extracted "${CURRENT_BUILDTREES_DIR}/src/${ref}.tmp")
  file(REMOVE_RECURSE "${source}" "${extracted}")
  file(ARCHIVE_EXTRACT INPUT "${archive}" DESTINATION "${extracted}")
  file(GLOB top "${extracted}/*")
  list(LENGTH top count)
  if(count EQUAL 1 AND IS_DIRECTORY "${top}")
    file(RENAME "${top}" "${source}")
    file(REMOVE_RECURSE "${extracted}")
  else()
    file(RENAME "${extracted}" "${source}")
  endif()
  set(${arg_OUT_SOURCE_PATH} "${source}" PARENT_SCOPE)
endfunction()

# --- vcpkg_configure_meson (ports/vcpkg-tool-meson/vcpkg_configure_meson.cmake) ---------
function(vcpkg_configure_meson)
  set(unimplemented LANGUAGES ADDITIONAL_BINARIES ADDITIONAL_NATIVE_BINARIES ADDITIONAL_CROSS_BINARIES
                    ADDITIONAL_PROPERTIES)
  cmake_parse_arguments(PARSE_ARGV 0 arg "NO_PKG_CONFIG" "SOURCE_PATH"
                        "OPTIONS;OPTIONS_DEBUG;OPTIONS_RELEASE;${unimplemented}")
  z_harness_no_extra_arguments(vcpkg_configure_meson)
  z_harness_unimplemented(vcpkg_configure_meson ${unimplemented})
  if(NOT arg_SOURCE_PATH)
    message(FATAL_ERROR "vcpkg_configure_meson: SOURCE_PATH is required")
  endif()

  file(REMOVE_RECURSE "${CURRENT_BUILDTREES_DIR}/${TARGET_TRIPLET}-rel"
                      "${CURRENT_BUILDTREES_DIR}/${TARGET_TRIPLET}-dbg")
  z_harness_find_tool(MESON meson)
  z_harness_find_tool(NINJA ninja)
  if(NOT arg_NO_PKG_CONFIG)
    z_harness_find_tool(PKGCONFIG pkg-config)
    set(ENV{PKG_CONFIG} "${PKGCONFIG}")
  endif()
  if(VCPKG_LIBRARY_LINKAGE STREQUAL "dynamic")
    set(default_library shared)
  else()
    set(default_library static)
  endif()

  z_harness_build_types(types)
  foreach(type IN LISTS types)
    set(build_dir "${CURRENT_BUILDTREES_DIR}/${TARGET_TRIPLET}-${type}")
    file(MAKE_DIRECTORY "${build_dir}")
    # The part of meson.template.in that does not come from the triplet's toolchain.
    set(native_file "${CURRENT_BUILDTREES_DIR}/meson-${TARGET_TRIPLET}-${type}.log")
    set(native "[binaries]\ncmake = ['${CMAKE_COMMAND}']\nninja = ['${NINJA}']\n")
    if(NOT arg_NO_PKG_CONFIG)
      string(APPEND native "pkg-config = ['${PKGCONFIG}']\n")
    endif()
    string(APPEND native "[built-in options]\ndefault_library = '${default_library}'\nwerror = false\n")
    file(WRITE "${native_file}" "${native}")

    if(type STREQUAL "rel")
      set(options ${arg_OPTIONS} ${arg_OPTIONS_RELEASE})
    else()
      set(options ${arg_OPTIONS} ${arg_OPTIONS_DEBUG})
    endif()
    list(APPEND options --backend ninja --wrap-mode nodownload -Doptimization=plain --native "${native_file}"
         --libdir lib --pkgconfig.relocatable)
    set(installed "${CURRENT_INSTALLED_DIR}")
    if(type STREQUAL "rel")
      list(APPEND options -Ddebug=false --prefix "${CURRENT_PACKAGES_DIR}"
           --pkg-config-path "['${installed}/lib/pkgconfig','${installed}/share/pkgconfig']"
           "-Dcmake_prefix_path=['${installed}','${installed}/debug']")
    else()
      list(APPEND options -Ddebug=true --prefix "${CURRENT_PACKAGES_DIR}/debug" --includedir ../include
           --pkg-config-path "['${installed}/debug/lib/pkgconfig','${installed}/share/pkgconfig']"
           "-Dcmake_prefix_path=['${installed}/debug','${installed}']")
    endif()
    z_harness_run(config-${TARGET_TRIPLET}-${type} "${build_dir}" ${MESON} setup ${options} "${arg_SOURCE_PATH}")
  endforeach()
endfunction()

# --- vcpkg_install_meson (ports/vcpkg-tool-meson/vcpkg_install_meson.cmake) ---------------
function(vcpkg_install_meson)
  cmake_parse_arguments(PARSE_ARGV 0 arg "ADD_BIN_TO_PATH" "" "")
  z_harness_no_extra_arguments(vcpkg_install_meson)
  z_harness_find_tool(NINJA ninja)
  unset(ENV{DESTDIR})  # the prefix was given to meson setup
  z_harness_build_types(types)
  foreach(type IN LISTS types)
    set(path "$ENV{PATH}")
    if(arg_ADD_BIN_TO_PATH)
      set(bin "${CURRENT_INSTALLED_DIR}/bin")
      if(type STREQUAL "dbg")
        set(bin "${CURRENT_INSTALLED_DIR}/debug/bin")
      endif()
      set(ENV{PATH} "${bin}:${path}")
    endif()
    z_harness_run(package-${TARGET_TRIPLET}-${type} "${CURRENT_BUILDTREES_DIR}/${TARGET_TRIPLET}-${type}"
                  "${NINJA}" install -v)
    set(ENV{PATH} "${path}")
  endforeach()
  # (vcpkg renames lib*.a to *.lib here for static Windows triplets.)
endfunction()

# --- vcpkg_cmake_config_fixup (ports/vcpkg-cmake-config/vcpkg_cmake_config_fixup.cmake) ----
# Moves the CMake package from CONFIG_PATH to share/<PACKAGE_NAME>, removes
# the emptied directory (and its parent when it is named cmake), points the
# config's prefix computation at the new place, and replaces absolute paths
# into the packages or installed tree.
function(vcpkg_cmake_config_fixup)
  cmake_parse_arguments(PARSE_ARGV 0 arg "DO_NOT_DELETE_PARENT_CONFIG_PATH;NO_PREFIX_CORRECTION"
                        "PACKAGE_NAME;CONFIG_PATH;TOOLS_PATH" "")
  z_harness_no_extra_arguments(vcpkg_cmake_config_fixup)
  if(NOT arg_PACKAGE_NAME)
    set(arg_PACKAGE_NAME "${PORT}")
  endif()
  if(NOT arg_CONFIG_PATH)
    set(arg_CONFIG_PATH "share/${arg_PACKAGE_NAME}")
  endif()
  if(arg_CONFIG_PATH STREQUAL "share")
    message(FATAL_ERROR "vcpkg_cmake_config_fixup(CONFIG_PATH share) is not implemented by the harness")
  endif()
  set(share "${CURRENT_PACKAGES_DIR}/share/${arg_PACKAGE_NAME}")
  set(debug_share "${CURRENT_PACKAGES_DIR}/debug/share/${arg_PACKAGE_NAME}")
  z_harness_build_types(types)

  if(NOT arg_CONFIG_PATH STREQUAL "share/${arg_PACKAGE_NAME}")
    set(moves "${CURRENT_PACKAGES_DIR}/${arg_CONFIG_PATH}>${share}")
    if("dbg" IN_LIST types)
      if(NOT EXISTS "${CURRENT_PACKAGES_DIR}/debug/${arg_CONFIG_PATH}")
        message(FATAL_ERROR "'${CURRENT_PACKAGES_DIR}/debug/${arg_CONFIG_PATH}' does not exist.")
      endif()
      list(PREPEND moves "${CURRENT_PACKAGES_DIR}/debug/${arg_CONFIG_PATH}>${debug_share}")
    endif()
    foreach(move IN LISTS moves)
      string(REPLACE ">" ";" move "${move}")
      list(GET move 0 from)
      list(GET move 1 to)
      # Like vcpkg: a CONFIG_PATH holding nothing copies nothing, without complaint.
      file(GLOB config_files "${from}/*")
      file(COPY ${config_files} DESTINATION "${to}")
      file(REMOVE_RECURSE "${from}")
      if(NOT arg_DO_NOT_DELETE_PARENT_CONFIG_PATH)
        get_filename_component(parent "${from}" DIRECTORY)
        get_filename_component(name "${from}" NAME)
        get_filename_component(parent_name "${parent}" NAME)
        string(TOLOWER "${parent_name}" parent_name)
        string(TOLOWER "${name}" name)
        if(NOT name STREQUAL "cmake" AND parent_name STREQUAL "cmake")
          file(REMOVE_RECURSE "${parent}")
        endif()
      endif()
    endforeach()
  endif()
  if("dbg" IN_LIST types AND NOT EXISTS "${debug_share}")
    message(FATAL_ERROR "'${debug_share}' does not exist.")
  endif()

  file(GLOB_RECURSE targets "${share}/*[Tt]argets*.cmake" "${debug_share}/*[Tt]argets*.cmake")
  if(targets)
    message(FATAL_ERROR "vcpkg_cmake_config_fixup: merging exported targets (${targets}) "
                        "is not implemented by the harness")
  endif()
  # The debug configuration's config and version files duplicate the release ones.
  file(GLOB_RECURSE duplicates "${debug_share}/*[Cc]onfig.cmake" "${debug_share}/*[Cc]onfigVersion.cmake"
                               "${debug_share}/*[Cc]onfig-version.cmake")
  if(duplicates)
    file(REMOVE ${duplicates})
  endif()

  file(GLOB_RECURSE cmake_files "${share}/*.cmake")
  foreach(cmake_file IN LISTS cmake_files)
    file(READ "${cmake_file}" contents)
    if(NOT arg_NO_PREFIX_CORRECTION)
      # configure_package_config_file (CMake's, and meson's with "/../../.." and
      # no trailing slash) climbs from the old place; share/<name> is two below the prefix.
      string(REGEX REPLACE
        [[get_filename_component\(PACKAGE_PREFIX_DIR "\${CMAKE_CURRENT_LIST_DIR}/\.\.([/\]\.\.)*/?" ABSOLUTE\)]]
        [[get_filename_component(PACKAGE_PREFIX_DIR "${CMAKE_CURRENT_LIST_DIR}/../../" ABSOLUTE)]]
        contents "${contents}")
      if(contents MATCHES "get_filename_component\\(_IMPORT_PREFIX")
        message(FATAL_ERROR "vcpkg_cmake_config_fixup: _IMPORT_PREFIX correction is not implemented by the harness")
      endif()
    endif()
    string(REPLACE "${CURRENT_INSTALLED_DIR}" "\${_IMPORT_PREFIX}" contents "${contents}")
    string(REPLACE "${CURRENT_PACKAGES_DIR}" "\${_IMPORT_PREFIX}" contents "${contents}")
    file(WRITE "${cmake_file}" "${contents}")
  endforeach()

  foreach(dir IN ITEMS "${debug_share}" "${CURRENT_PACKAGES_DIR}/debug/share")
    file(GLOB_RECURSE remaining "${dir}/*")
    if(NOT remaining)
      file(REMOVE_RECURSE "${dir}")
    endif()
  endforeach()
endfunction()

# --- vcpkg_fixup_pkgconfig (scripts/cmake/vcpkg_fixup_pkgconfig.cmake) -------------------------
# Makes every .pc relocatable (prefix=${pcfiledir}/<up to the package root>),
# replaces absolute paths into the packages or installed tree with ${prefix},
# quotes -I/-L/-l paths that start with a variable, folds the .private
# fields into the public ones for static triplets, then has pkg-config load
# each file the way vcpkg's configuration searches for it.
function(z_harness_fixup_pc file type)
  get_filename_component(pc_dir "${file}" DIRECTORY)
  set(root "${CURRENT_PACKAGES_DIR}")
  if(type STREQUAL "dbg")
    set(root "${CURRENT_PACKAGES_DIR}/debug")
  endif()
  file(RELATIVE_PATH up "${pc_dir}" "${root}")
  string(REGEX REPLACE "/$" "" up "${up}")

  file(READ "${file}" contents)
  string(REPLACE "\r\n" "\n" contents "${contents}")
  if(NOT contents MATCHES "\n$")
    string(APPEND contents "\n")
  endif()
  foreach(dir IN ITEMS "${CURRENT_PACKAGES_DIR}" "${CURRENT_INSTALLED_DIR}")
    string(REPLACE "${dir}" "\${prefix}" contents "${contents}")
  endforeach()
  string(REGEX REPLACE "(^|\n) *prefix[\t ]*=[^\n]*" "" contents "${contents}")
  if(type STREQUAL "dbg")
    string(REPLACE "\${prefix}/debug" "\${prefix}" contents "${contents}")
    string(REPLACE "\${prefix}/include" "\${prefix}/../include" contents "${contents}")
    string(REPLACE "\${prefix}/share" "\${prefix}/../share" contents "${contents}")
  endif()
  string(REGEX REPLACE " -([LIl])(\\\${[^}]*}[^ \n\t]*)" " -\\1\"\\2\"" contents "${contents}")
  if(VCPKG_LIBRARY_LINKAGE STREQUAL "static")
    foreach(field IN ITEMS Libs Requires Cflags)
      set(merged "")
      foreach(suffix IN ITEMS "" "\\.private")
        if(contents MATCHES "(^|\n)${field}${suffix}: *([^\n]*)")
          string(APPEND merged " ${CMAKE_MATCH_2}")
        endif()
      endforeach()
      string(REGEX REPLACE "(^|\n)${field}(\\.private)?:[^\n]*\n" "\\1" contents "${contents}")
      if(NOT merged STREQUAL "")
        string(APPEND contents "${field}:${merged}\n")
      endif()
    endforeach()
  endif()
  file(WRITE "${file}" "prefix=\${pcfiledir}/${up}\n${contents}")
endfunction()

function(z_harness_check_pc file type)
  set(lib "${CURRENT_PACKAGES_DIR}/lib/pkgconfig")
  set(installed_lib "${CURRENT_INSTALLED_DIR}/lib/pkgconfig")
  if(type STREQUAL "dbg")
    set(lib "${CURRENT_PACKAGES_DIR}/debug/lib/pkgconfig")
    set(installed_lib "${CURRENT_INSTALLED_DIR}/debug/lib/pkgconfig")
  endif()
  set(search "${lib}:${CURRENT_PACKAGES_DIR}/share/pkgconfig:${installed_lib}:${CURRENT_INSTALLED_DIR}/share/pkgconfig")
  if(DEFINED ENV{PKG_CONFIG_PATH})
    string(APPEND search ":$ENV{PKG_CONFIG_PATH}")
  endif()
  get_filename_component(name "${file}" NAME_WLE)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E env "PKG_CONFIG_PATH=${search}"
                          "${PKGCONFIG}" --print-errors --exists "${name}"
                  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${PKGCONFIG} --exists ${name} failed (${status})\n  PKG_CONFIG_PATH: ${search}\n${output}")
  endif()
endfunction()

function(vcpkg_fixup_pkgconfig)
  cmake_parse_arguments(PARSE_ARGV 0 arg "SKIP_CHECK" ""
                        "RELEASE_FILES;DEBUG_FILES;SYSTEM_LIBRARIES;SYSTEM_PACKAGES;IGNORE_FLAGS")
  z_harness_no_extra_arguments(vcpkg_fixup_pkgconfig)
  # SYSTEM_LIBRARIES, SYSTEM_PACKAGES and IGNORE_FLAGS are deprecated and ignored by vcpkg.
  if(DEFINED arg_RELEASE_FILES AND NOT DEFINED arg_DEBUG_FILES)
    message(FATAL_ERROR "DEBUG_FILES must be specified if RELEASE_FILES was specified.")
  endif()
  if(DEFINED arg_DEBUG_FILES AND NOT DEFINED arg_RELEASE_FILES)
    message(FATAL_ERROR "RELEASE_FILES must be specified if DEBUG_FILES was specified.")
  endif()
  if(NOT DEFINED arg_RELEASE_FILES)
    file(GLOB_RECURSE arg_RELEASE_FILES "${CURRENT_PACKAGES_DIR}/*.pc")
    file(GLOB_RECURSE arg_DEBUG_FILES "${CURRENT_PACKAGES_DIR}/debug/*.pc")
    if(arg_DEBUG_FILES)
      list(REMOVE_ITEM arg_RELEASE_FILES ${arg_DEBUG_FILES})
    endif()
  endif()
  set(arg_rel_FILES ${arg_RELEASE_FILES})
  set(arg_dbg_FILES ${arg_DEBUG_FILES})
  z_harness_build_types(types)
  foreach(type IN LISTS types)
    foreach(file IN LISTS arg_${type}_FILES)
      message(STATUS "Fixing pkgconfig file: ${file}")
      z_harness_fixup_pc("${file}" ${type})
    endforeach()
    if(NOT arg_SKIP_CHECK)
      z_harness_find_tool(PKGCONFIG pkg-config)
      foreach(file IN LISTS arg_${type}_FILES)
        z_harness_check_pc("${file}" ${type})
      endforeach()
    endif()
  endforeach()
endfunction()

# --- vcpkg_install_copyright (scripts/cmake/vcpkg_install_copyright.cmake) ----------------------
function(vcpkg_install_copyright)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "COMMENT" "FILE_LIST")
  z_harness_no_extra_arguments(vcpkg_install_copyright)
  if(NOT DEFINED arg_FILE_LIST)
    message(FATAL_ERROR "FILE_LIST must be specified")
  endif()
  list(LENGTH arg_FILE_LIST count)
  if(count EQUAL 1 AND NOT arg_COMMENT)
    file(INSTALL "${arg_FILE_LIST}" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}" RENAME copyright)
    return()
  endif()
  set(text "")
  if(arg_COMMENT)
    set(text "${arg_COMMENT}\n\n")
  endif()
  foreach(item IN LISTS arg_FILE_LIST)
    if(NOT EXISTS "${item}")
      message(FATAL_ERROR "vcpkg_install_copyright was passed a non-existing path: ${item}")
    endif()
    file(READ "${item}" item_text)
    if(count EQUAL 1)
      string(APPEND text "${item_text}")
    else()
      get_filename_component(item_name "${item}" NAME)
      string(APPEND text "${item_name}:\n\n${item_text}\n\n")
    endif()
  endforeach()
  file(WRITE "${CURRENT_PACKAGES_DIR}/share/${PORT}/copyright" "${text}")
endfunction()

# --- the port ---------------------------------------------------------------------------
message(STATUS "harness: ${PORT} ${VERSION} for ${TARGET_TRIPLET} into ${CURRENT_PACKAGES_DIR}")
include("${CURRENT_PORT_DIR}/portfile.cmake")
message(STATUS "harness: portfile.cmake done")
