# gpusvc.cmake: build libgpusvc with cargo inside a CMake build, import it, and install it.
#
#   include(path/to/gpusvc/cmake/gpusvc.cmake)
#   gpusvc_import(SOURCE_DIR path/to/gpusvc
#                 [PROFILE debug|release]       # default debug
#                 [GL ON|OFF]                   # default ON; OFF: --no-default-features
#                 [TARGET_TRIPLE triple]        # cargo --target (cross builds)
#                 [TARGET_DIR dir]              # default ${CMAKE_BINARY_DIR}/gpusvc-cargo
#                 [STRIP_DEBUG ON|OFF]          # default ON for release, OFF for debug
#                 [OFFLINE])                    # cargo --offline (vendored sources)
#   target_link_libraries(my_gpu_process PRIVATE gpusvc::gpusvc)   # static libgpusvc.a
#   target_link_libraries(my_tool PRIVATE gpusvc::shared)          # libgpusvc.so.0
#   gpusvc_install()   # optional: headers, both libraries, gpusvcConfig.cmake, gpusvc.pc
#
# * The build runs `cargo build --locked -p gpusvc-ffi` every time (cargo decides what is
#   stale; no Corrosion needed) with its target folder in the host's build folder, so the
#   source tree may be read-only (a vendored copy). `--locked` never writes Cargo.lock.
# * The libraries are staged into ${CMAKE_BINARY_DIR}/gpusvc/lib: libgpusvc.a (debug info
#   stripped with CMAKE_STRIP when STRIP_DEBUG is on: Rust bundles the standard library's debug
#   info into a staticlib whatever the profile says), and libgpusvc.so.X.Y.Z with the links
#   libgpusvc.so.0 (its SONAME) and libgpusvc.so.
# * gpusvc::gpusvc carries the include directory and the system libraries a Rust staticlib
#   needs (Threads, dl, m) and libstdc++ (the C++ meshoptimizer inside the vertex-cache
#   optimizer). No GL library is linked either way: with GL ON, libEGL is loaded at run time
#   when a gpusvc_gl_context is opened.
# * With GL OFF the library contains neither glutin nor glow; the exports that open or use
#   gpusvc's own context (gpusvc_gl_context_*, gpusvc_program_manager_new_gl*,
#   gpusvc_restore_ahead_*, gpusvc_vcache_measure, gpusvc_vcache_fit*) are then absent (a link
#   error if called). Hosts with their own GL use gpusvc_program_manager_new_host.
# * Importing twice is harmless: the second call returns (with a warning when its arguments
#   differ from the first's). A SOURCE_DIR that is not a gpusvc tree fails at configure time.
#
# In the README: "Linking libgpusvc from a C++ host (CMake)". cmake/tests/package.sh tests all
# of the above (read-only source, GL OFF, install, find_package, pkg-config, nm, SONAME).
include_guard(GLOBAL)
cmake_minimum_required(VERSION 3.25)

set(_GPUSVC_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")

function(gpusvc_import)
  cmake_parse_arguments(ARG "OFFLINE" "SOURCE_DIR;PROFILE;TARGET_DIR;TARGET_TRIPLE;GL;STRIP_DEBUG"
                        "" ${ARGN})
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "gpusvc_import: unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_SOURCE_DIR)
    message(FATAL_ERROR "gpusvc_import: SOURCE_DIR is required (the gpusvc source tree)")
  endif()
  get_filename_component(src "${ARG_SOURCE_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  foreach(f Cargo.toml Cargo.lock ffi/Cargo.toml ffi/include/gpusvc.h)
    if(NOT EXISTS "${src}/${f}")
      message(FATAL_ERROR "gpusvc_import: SOURCE_DIR \"${src}\" is not a gpusvc source tree "
                          "(${src}/${f} does not exist)")
    endif()
  endforeach()
  if(NOT ARG_PROFILE)
    set(ARG_PROFILE debug)
  endif()
  if(NOT ARG_PROFILE MATCHES "^(debug|release)$")
    message(FATAL_ERROR "gpusvc_import: PROFILE must be debug or release, not \"${ARG_PROFILE}\"")
  endif()
  if(NOT DEFINED ARG_GL)
    set(ARG_GL ON)
  endif()
  if(ARG_GL)
    set(gl ON)
  else()
    set(gl OFF)
  endif()
  if(NOT DEFINED ARG_STRIP_DEBUG)
    if(ARG_PROFILE STREQUAL "release")
      set(ARG_STRIP_DEBUG ON)
    else()
      set(ARG_STRIP_DEBUG OFF)
    endif()
  endif()
  if(NOT ARG_TARGET_DIR)
    set(ARG_TARGET_DIR "${CMAKE_BINARY_DIR}/gpusvc-cargo")
  endif()
  get_filename_component(target_dir "${ARG_TARGET_DIR}" ABSOLUTE BASE_DIR "${CMAKE_BINARY_DIR}")

  # A second import (the example host added under the C++ tests, two libraries of one project
  # that both import gpusvc): the first one's targets stay.
  set(key "${src}|${ARG_PROFILE}|${gl}|${ARG_TARGET_TRIPLE}|${target_dir}|${ARG_STRIP_DEBUG}|${ARG_OFFLINE}")
  if(TARGET gpusvc::gpusvc)
    get_property(first GLOBAL PROPERTY GPUSVC_IMPORT_KEY)
    if(NOT first STREQUAL key)
      message(WARNING "gpusvc_import: gpusvc is already imported (${first}); this call's "
                      "arguments (${key}) are ignored")
    endif()
    return()
  endif()
  set_property(GLOBAL PROPERTY GPUSVC_IMPORT_KEY "${key}")

  # The version (and so the SONAME's major) from [workspace.package].
  file(STRINGS "${src}/Cargo.toml" version_line REGEX "^version = \"[0-9]+\\.[0-9]+\\.[0-9]+\"" LIMIT_COUNT 1)
  if(NOT version_line MATCHES "\"(([0-9]+)\\.[0-9]+\\.[0-9]+)\"")
    message(FATAL_ERROR "gpusvc_import: no version = \"X.Y.Z\" line in ${src}/Cargo.toml")
  endif()
  set(version "${CMAKE_MATCH_1}")
  set(major "${CMAKE_MATCH_2}")

  find_package(Threads REQUIRED)
  find_program(GPUSVC_CARGO cargo HINTS "$ENV{CARGO_HOME}/bin" "$ENV{HOME}/.cargo/bin" REQUIRED)

  set(cargo_args build --locked -p gpusvc-ffi --manifest-path "${src}/Cargo.toml"
                 --target-dir "${target_dir}")
  if(ARG_PROFILE STREQUAL "release")
    list(APPEND cargo_args --release)
  endif()
  if(NOT gl)
    list(APPEND cargo_args --no-default-features)
  endif()
  if(ARG_OFFLINE)
    list(APPEND cargo_args --offline)
  endif()
  if(ARG_TARGET_TRIPLE)
    list(APPEND cargo_args --target "${ARG_TARGET_TRIPLE}")
    set(out_dir "${target_dir}/${ARG_TARGET_TRIPLE}/${ARG_PROFILE}")
  else()
    set(out_dir "${target_dir}/${ARG_PROFILE}")
  endif()

  set(lib_dir "${CMAKE_BINARY_DIR}/gpusvc/lib")
  set(strip "")
  if(ARG_STRIP_DEBUG)
    if(NOT CMAKE_STRIP)
      message(FATAL_ERROR "gpusvc_import: STRIP_DEBUG needs CMAKE_STRIP (enable C or CXX first)")
    endif()
    set(strip "${CMAKE_STRIP}")
  endif()
  set(staged "${lib_dir}/libgpusvc.a" "${lib_dir}/libgpusvc.so.${version}"
             "${lib_dir}/libgpusvc.so.${major}" "${lib_dir}/libgpusvc.so")

  # cargo runs in the source tree so that its .cargo/config.toml (vendored sources) applies;
  # it writes only under target_dir.
  add_custom_target(gpusvc_cargo_build
    COMMAND "${GPUSVC_CARGO}" ${cargo_args}
    COMMAND "${CMAKE_COMMAND}" -DFROM=${out_dir} -DTO=${lib_dir} -DVERSION=${version}
            -DMAJOR=${major} -DSTRIP=${strip} -P "${_GPUSVC_CMAKE_DIR}/gpusvc_stage.cmake"
    BYPRODUCTS "${out_dir}/libgpusvc.a" "${out_dir}/libgpusvc.so" ${staged}
    WORKING_DIRECTORY "${src}"
    COMMENT "cargo build -p gpusvc-ffi (${ARG_PROFILE}, gl ${gl}) into ${target_dir}"
    VERBATIM
    USES_TERMINAL)

  add_library(gpusvc_static_imported STATIC IMPORTED GLOBAL)
  set_target_properties(gpusvc_static_imported PROPERTIES
    IMPORTED_LOCATION "${lib_dir}/libgpusvc.a")
  add_library(gpusvc_shared_imported SHARED IMPORTED GLOBAL)
  set_target_properties(gpusvc_shared_imported PROPERTIES
    IMPORTED_LOCATION "${lib_dir}/libgpusvc.so.${version}"
    IMPORTED_SONAME "libgpusvc.so.${major}")

  add_library(gpusvc_gpusvc INTERFACE)
  target_include_directories(gpusvc_gpusvc INTERFACE "${src}/ffi/include")
  target_link_libraries(gpusvc_gpusvc INTERFACE
    gpusvc_static_imported Threads::Threads ${CMAKE_DL_LIBS} m stdc++)
  add_dependencies(gpusvc_gpusvc gpusvc_cargo_build)
  add_library(gpusvc::gpusvc ALIAS gpusvc_gpusvc)

  add_library(gpusvc_shared INTERFACE)
  target_include_directories(gpusvc_shared INTERFACE "${src}/ffi/include")
  target_link_libraries(gpusvc_shared INTERFACE gpusvc_shared_imported)
  add_dependencies(gpusvc_shared gpusvc_cargo_build)
  add_library(gpusvc::shared ALIAS gpusvc_shared)

  set_property(GLOBAL PROPERTY GPUSVC_SOURCE_DIR "${src}")
  set_property(GLOBAL PROPERTY GPUSVC_LIB_DIR "${lib_dir}")
  set_property(GLOBAL PROPERTY GPUSVC_VERSION "${version}")
  set_property(GLOBAL PROPERTY GPUSVC_GL "${gl}")
  # For the caller: what was imported.
  set(GPUSVC_VERSION "${version}" PARENT_SCOPE)
  set(GPUSVC_GL "${gl}" PARENT_SCOPE)
endfunction()

# Install rules for what gpusvc_import built: include/gpusvc.h and gpusvc.hpp,
# lib/libgpusvc.a, lib/libgpusvc.so.X.Y.Z with the links libgpusvc.so.0 and libgpusvc.so,
# lib/cmake/gpusvc/gpusvcConfig.cmake (+ version file: find_package(gpusvc 0.1) gives
# gpusvc::gpusvc and gpusvc::shared) and lib/pkgconfig/gpusvc.pc.
function(gpusvc_install)
  if(NOT TARGET gpusvc::gpusvc)
    message(FATAL_ERROR "gpusvc_install: call gpusvc_import first")
  endif()
  get_property(installed GLOBAL PROPERTY GPUSVC_INSTALLED)
  if(installed)
    return()
  endif()
  set_property(GLOBAL PROPERTY GPUSVC_INSTALLED ON)
  get_property(src GLOBAL PROPERTY GPUSVC_SOURCE_DIR)
  get_property(lib_dir GLOBAL PROPERTY GPUSVC_LIB_DIR)
  get_property(version GLOBAL PROPERTY GPUSVC_VERSION)
  get_property(gl GLOBAL PROPERTY GPUSVC_GL)
  string(REGEX MATCH "^[0-9]+" major "${version}")
  include(GNUInstallDirs)
  include(CMakePackageConfigHelpers)

  install(FILES "${src}/ffi/include/gpusvc.h" "${src}/ffi/include/gpusvc.hpp"
          DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
  install(FILES "${lib_dir}/libgpusvc.a" DESTINATION "${CMAKE_INSTALL_LIBDIR}")
  install(PROGRAMS "${lib_dir}/libgpusvc.so.${version}" DESTINATION "${CMAKE_INSTALL_LIBDIR}")
  # Links are installed as links.
  install(FILES "${lib_dir}/libgpusvc.so.${major}" "${lib_dir}/libgpusvc.so"
          DESTINATION "${CMAKE_INSTALL_LIBDIR}")

  set(pkg_dir "${CMAKE_BINARY_DIR}/gpusvc/package")
  set(GPUSVC_INCLUDE_DIR "${CMAKE_INSTALL_INCLUDEDIR}")
  set(GPUSVC_LIB_DIR "${CMAKE_INSTALL_LIBDIR}")
  set(GPUSVC_DL_LIBS "${CMAKE_DL_LIBS}")
  set(GPUSVC_MAJOR "${major}")
  set(GPUSVC_VERSION "${version}")
  set(GPUSVC_GL "${gl}")
  configure_package_config_file("${_GPUSVC_CMAKE_DIR}/gpusvcConfig.cmake.in"
    "${pkg_dir}/gpusvcConfig.cmake"
    INSTALL_DESTINATION "${CMAKE_INSTALL_LIBDIR}/cmake/gpusvc"
    PATH_VARS GPUSVC_INCLUDE_DIR GPUSVC_LIB_DIR)
  # 0.x releases keep the ABI by appending (SONAME libgpusvc.so.0): same major is compatible.
  write_basic_package_version_file("${pkg_dir}/gpusvcConfigVersion.cmake"
    VERSION "${version}" COMPATIBILITY SameMajorVersion)
  install(FILES "${pkg_dir}/gpusvcConfig.cmake" "${pkg_dir}/gpusvcConfigVersion.cmake"
          DESTINATION "${CMAKE_INSTALL_LIBDIR}/cmake/gpusvc")

  # gpusvc.pc, relocatable: prefix relative to the .pc file's own folder.
  file(RELATIVE_PATH pc_to_prefix "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  set(GPUSVC_PC_PREFIX "\${pcfiledir}/${pc_to_prefix}")
  string(REGEX REPLACE "/$" "" GPUSVC_PC_PREFIX "${GPUSVC_PC_PREFIX}")
  configure_file("${_GPUSVC_CMAKE_DIR}/gpusvc.pc.in" "${pkg_dir}/gpusvc.pc" @ONLY)
  install(FILES "${pkg_dir}/gpusvc.pc" DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
endfunction()
