# Install rules (included once, at the end of the top-level CMakeLists.txt).
#
#   cmake --install build [--prefix DIR]
#
# puts in place:
#   include/tilelang/{runtime.h,cpu_kernel_abi.h}
#   <libdir>/libtilelang_runtime.so
#   bin/tl-pack
#   <libdir>/pkgconfig/tilelang-runtime.pc          (relocatable: ${pcfiledir})
#   <libdir>/cmake/TileLang/TileLangConfig.cmake    (find_package(TileLang) -> TileLang::runtime, TileLang::tl-pack)
#   ${TL_INSTALL_PYTHONDIR}/{tilelang,tilelang_runtime}   (from build/python)
#   share/tilelang/{tilelang-std.tlb,CATALOGUE.md,README.md}  (the standard kernel library, when
#                                                    packed: target tilelang_std_bundle)
#
# The build tree gets its own pkg-config file, build/lib/pkgconfig/tilelang-runtime.pc,
# pointing at build/lib and the source headers (with an rpath), so that the Rust
# and Go bindings build and run against a fresh build with
#   PKG_CONFIG_PATH=<build>/lib/pkgconfig
# (or, for Rust, TL_RUNTIME_LIB_DIR=<build>/lib).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TL_INSTALL_PYTHONDIR "${CMAKE_INSTALL_LIBDIR}/python3/dist-packages" CACHE STRING
    "Where the Python packages tilelang and tilelang_runtime are installed (relative to the prefix)")
set(TL_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/TileLang")
set(TL_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
set(_tl_src ${CMAKE_CURRENT_LIST_DIR}/..)

# --- Runtime library, headers, tl-pack ---------------------------------------
if(NOT TARGET tilelang_runtime)
  message(STATUS "install.cmake: no tilelang_runtime target; nothing to install")
  return()
endif()
install(TARGETS tilelang_runtime
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(FILES
  ${_tl_src}/runtime/include/tilelang/runtime.h
  ${_tl_src}/runtime/include/tilelang/cpu_kernel_abi.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tilelang COMPONENT runtime)
if(TARGET tl-pack)
  install(TARGETS tl-pack RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
endif()

# --- Python packages (copied into build/python by their own folders) ---------
install(DIRECTORY ${TL_PYTHON_DIR}/tilelang ${TL_PYTHON_DIR}/tilelang_runtime
  DESTINATION ${TL_INSTALL_PYTHONDIR} COMPONENT python OPTIONAL
  PATTERN "__pycache__" EXCLUDE
  PATTERN "*.pyc" EXCLUDE)

# --- pkg-config --------------------------------------------------------------
# Installed: relocatable through ${pcfiledir}.
file(RELATIVE_PATH _tl_pc_up "/p/${TL_INSTALL_PKGCONFIGDIR}" "/p")
string(REGEX REPLACE "/$" "" _tl_pc_up "${_tl_pc_up}")
set(TL_PC_PREFIX "\${pcfiledir}/${_tl_pc_up}")
set(TL_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
set(TL_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
set(TL_PC_EXTRA_LIBS "")
configure_file(${CMAKE_CURRENT_LIST_DIR}/tilelang-runtime.pc.in
  ${CMAKE_BINARY_DIR}/install-files/tilelang-runtime.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/install-files/tilelang-runtime.pc
  DESTINATION ${TL_INSTALL_PKGCONFIGDIR} COMPONENT runtime)

# Build tree: absolute paths, rpath to build/lib.
get_filename_component(_tl_src_abs ${_tl_src} ABSOLUTE)
set(TL_PC_PREFIX "${CMAKE_BINARY_DIR}")
set(TL_PC_LIBDIR "${CMAKE_BINARY_DIR}/lib")
set(TL_PC_INCLUDEDIR "${_tl_src_abs}/runtime/include")
set(TL_PC_EXTRA_LIBS "-Wl,-rpath,\${libdir}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/tilelang-runtime.pc.in
  ${CMAKE_BINARY_DIR}/lib/pkgconfig/tilelang-runtime.pc @ONLY)

# --- CMake package -----------------------------------------------------------
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/TileLangConfig.cmake.in
  ${CMAKE_BINARY_DIR}/install-files/TileLangConfig.cmake
  INSTALL_DESTINATION ${TL_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/install-files/TileLangConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES
  ${CMAKE_BINARY_DIR}/install-files/TileLangConfig.cmake
  ${CMAKE_BINARY_DIR}/install-files/TileLangConfigVersion.cmake
  DESTINATION ${TL_INSTALL_CMAKEDIR} COMPONENT runtime)

# --- The standard kernel library --------------------------------------------
# `cmake --build build --target tilelang_std_bundle` packs kernels/manifest.json into
# build/share/tilelang/tilelang-std.tlb (every target this machine's toolchains allow; cached in
# build/tilelang-cache, so a second run compiles nothing). `cmake --install` then puts it, with
# kernels/CATALOGUE.md, under <prefix>/share/tilelang/, where tl_bundle_open_by_name("tilelang-std")
# finds it (after $TILELANG_KERNEL_PATH). Not in ALL: packing every level takes minutes.
if(TARGET tl-pack)
  add_custom_target(tilelang_std_bundle
    COMMAND tl-pack build ${_tl_src}/kernels/manifest.json
            -o ${CMAKE_BINARY_DIR}/share/tilelang/tilelang-std.tlb --cache-dir ${CMAKE_BINARY_DIR}/tilelang-cache
    COMMENT "tl-pack build kernels/manifest.json -> share/tilelang/tilelang-std.tlb"
    VERBATIM)
  if(TARGET tilelang_python)
    add_dependencies(tilelang_std_bundle tilelang_python)
  endif()
endif()
install(FILES ${CMAKE_BINARY_DIR}/share/tilelang/tilelang-std.tlb
  DESTINATION ${CMAKE_INSTALL_DATADIR}/tilelang COMPONENT kernels OPTIONAL)
install(FILES ${_tl_src}/kernels/CATALOGUE.md ${_tl_src}/kernels/README.md
  DESTINATION ${CMAKE_INSTALL_DATADIR}/tilelang COMPONENT kernels OPTIONAL)

# --- Test: build and run programs against an installed tree only -------------
# (C with pkg-config and with find_package, examples/c, the Python packages,
# and examples/rust and examples/go when cargo and go are present.)
# Not under sanitizers: programs built outside this build would load an
# instrumented library without the sanitizer runtime first.
if(TL_BUILD_TESTS AND TARGET tl_rt_standard_bundle AND NOT TL_SANITIZE_ADDRESS AND NOT TL_SANITIZE_THREAD)
  find_program(TL_PKG_CONFIG_EXECUTABLE NAMES pkg-config pkgconf)
  find_program(TL_INSTALL_TEST_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
  find_program(TL_INSTALL_TEST_CARGO NAMES cargo HINTS $ENV{HOME}/.cargo/bin)
  find_program(TL_INSTALL_TEST_GO NAMES go)
  foreach(v TL_INSTALL_TEST_CARGO TL_INSTALL_TEST_GO)
    if(NOT ${v})
      set(${v} "")
    endif()
  endforeach()
  add_test(NAME install.consumers
    COMMAND ${CMAKE_COMMAND}
      -DBUILD_DIR=${CMAKE_BINARY_DIR}
      -DSOURCE_DIR=${_tl_src_abs}
      -DWORK_DIR=${CMAKE_BINARY_DIR}/tests/install
      -DBUNDLE=${TL_RT_STANDARD_BUNDLE}
      -DCC=${CMAKE_C_COMPILER}
      -DPKG_CONFIG=${TL_PKG_CONFIG_EXECUTABLE}
      -DPYTHON=${TL_INSTALL_TEST_PYTHON}
      -DCARGO=${TL_INSTALL_TEST_CARGO}
      -DGO=${TL_INSTALL_TEST_GO}
      -DCMAKE_GENERATOR=${CMAKE_GENERATOR}
      -P ${_tl_src_abs}/tests/install/run_install_test.cmake)
  # Installs into its own prefix; nothing else uses tests/install.
  set_tests_properties(install.consumers PROPERTIES TIMEOUT 600 LABELS install)
endif()
