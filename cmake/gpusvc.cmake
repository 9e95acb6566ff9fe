# gpusvc.cmake: build libgpusvc with cargo and import it into a CMake project.
#
#   include(path/to/gpusvc/cmake/gpusvc.cmake)
#   gpusvc_import(SOURCE_DIR path/to/gpusvc [PROFILE debug|release] [TARGET_DIR dir])
#   target_link_libraries(my_gpu_process PRIVATE gpusvc::gpusvc)          # static
#   target_link_libraries(my_tool PRIVATE gpusvc::shared)                 # libgpusvc.so
#
# The build runs `cargo build -p gpusvc-ffi` every time (cargo decides what is stale); no
# Corrosion needed. gpusvc::gpusvc carries the include directory and the system libraries a
# Rust staticlib needs (Threads, dl, m), and libstdc++ for the C++ meshoptimizer inside the
# vertex-cache optimizer.
cmake_minimum_required(VERSION 3.25)

function(gpusvc_import)
  cmake_parse_arguments(ARG "" "SOURCE_DIR;PROFILE;TARGET_DIR" "" ${ARGN})
  if(NOT ARG_SOURCE_DIR)
    message(FATAL_ERROR "gpusvc_import: SOURCE_DIR is required")
  endif()
  if(NOT ARG_PROFILE)
    set(ARG_PROFILE debug)
  endif()
  if(NOT ARG_TARGET_DIR)
    set(ARG_TARGET_DIR "${ARG_SOURCE_DIR}/target")
  endif()
  find_package(Threads REQUIRED)
  find_program(GPUSVC_CARGO cargo HINTS "$ENV{HOME}/.cargo/bin" REQUIRED)

  set(profile_flag "")
  if(ARG_PROFILE STREQUAL "release")
    set(profile_flag "--release")
  elseif(NOT ARG_PROFILE STREQUAL "debug")
    message(FATAL_ERROR "gpusvc_import: PROFILE must be debug or release")
  endif()
  set(out_dir "${ARG_TARGET_DIR}/${ARG_PROFILE}")
  set(static_lib "${out_dir}/libgpusvc.a")
  set(shared_lib "${out_dir}/libgpusvc.so")

  add_custom_target(gpusvc_cargo_build
    COMMAND "${GPUSVC_CARGO}" build --locked -p gpusvc-ffi ${profile_flag}
            --manifest-path "${ARG_SOURCE_DIR}/Cargo.toml" --target-dir "${ARG_TARGET_DIR}"
    BYPRODUCTS "${static_lib}" "${shared_lib}"
    WORKING_DIRECTORY "${ARG_SOURCE_DIR}"
    COMMENT "cargo build -p gpusvc-ffi (${ARG_PROFILE})"
    USES_TERMINAL)

  add_library(gpusvc_static_imported STATIC IMPORTED GLOBAL)
  set_target_properties(gpusvc_static_imported PROPERTIES IMPORTED_LOCATION "${static_lib}")
  add_library(gpusvc_shared_imported SHARED IMPORTED GLOBAL)
  set_target_properties(gpusvc_shared_imported PROPERTIES
    IMPORTED_LOCATION "${shared_lib}"
    IMPORTED_SONAME "libgpusvc.so")

  add_library(gpusvc_gpusvc INTERFACE)
  target_include_directories(gpusvc_gpusvc INTERFACE "${ARG_SOURCE_DIR}/ffi/include")
  target_link_libraries(gpusvc_gpusvc INTERFACE
    gpusvc_static_imported Threads::Threads ${CMAKE_DL_LIBS} m stdc++)
  add_dependencies(gpusvc_gpusvc gpusvc_cargo_build)
  add_library(gpusvc::gpusvc ALIAS gpusvc_gpusvc)

  add_library(gpusvc_shared INTERFACE)
  target_include_directories(gpusvc_shared INTERFACE "${ARG_SOURCE_DIR}/ffi/include")
  target_link_libraries(gpusvc_shared INTERFACE gpusvc_shared_imported)
  add_dependencies(gpusvc_shared gpusvc_cargo_build)
  add_library(gpusvc::shared ALIAS gpusvc_shared)
endfunction()
