# Install rules and the comfyquant CMake / pkg-config packages.
#
#   find_package(comfyquant 0.5 REQUIRED)        # comfyquant::runtime
#   find_package(comfyquant REQUIRED COMPONENTS compiler)
#                                                # + comfyquant::compiler
#   pkg-config --cflags --libs comfyquant
#
# comfyquant::runtime is libcomfyquant (C API only, nlohmann/json private).
# comfyquant::compiler, installed when the compiler is built, is the MLIR
# libraries with their headers; it needs the MLIR package it was built with.
include(CMakePackageConfigHelpers)

set(COMFYQUANT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/comfyquant)

install(TARGETS comfyquant EXPORT comfyquantTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES
  ${PROJECT_SOURCE_DIR}/runtime/include/comfyquant/comfyquant.h
  ${PROJECT_BINARY_DIR}/runtime/include/comfyquant/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/comfyquant)
install(EXPORT comfyquantTargets NAMESPACE comfyquant::
  FILE comfyquantTargets.cmake DESTINATION ${COMFYQUANT_CMAKE_DIR})
# The tool that needs no MLIR/LLVM.
install(TARGETS comfyquant-run RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

if(COMFYQUANT_BUILD_COMPILER)
  set(COMFYQUANT_COMPILER_LIBS ComfyQuantDialect ComfyQuantTransforms
    ComfyQuantImport ComfyQuantPipelines ComfyQuantConversion
    ComfyQuantCodegenCommon ComfyQuantCodegenHost ComfyQuantCodegenCPU
    ComfyQuantCodegenGPU
    ComfyQuantCompiler)
  # The compiler libraries use the runtime's C++ API, so they link the
  # in-tree static runtime and install it under their export set.
  add_library(comfyquant_compiler INTERFACE)
  set_target_properties(comfyquant_compiler PROPERTIES EXPORT_NAME compiler)
  target_link_libraries(comfyquant_compiler INTERFACE ${COMFYQUANT_COMPILER_LIBS})
  target_include_directories(comfyquant_compiler INTERFACE
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
  add_library(comfyquant::compiler ALIAS comfyquant_compiler)
  install(TARGETS comfyquant_core ${COMFYQUANT_COMPILER_LIBS}
    comfyquant_compiler EXPORT comfyquantCompilerTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT comfyquantCompilerTargets NAMESPACE comfyquant::
    FILE comfyquantCompilerTargets.cmake DESTINATION ${COMFYQUANT_CMAKE_DIR})
  install(TARGETS comfyquant-opt comfyquant-translate comfyquant-compile
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/comfyquant
    ${PROJECT_SOURCE_DIR}/runtime/include/comfyquant
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.h" PATTERN "*.td")
  install(DIRECTORY ${PROJECT_BINARY_DIR}/include/comfyquant
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.inc"
    PATTERN "CMakeFiles" EXCLUDE)
  set(COMFYQUANT_HAS_COMPILER ON)
  set(COMFYQUANT_MLIR_DIR ${MLIR_DIR})
else()
  set(COMFYQUANT_HAS_COMPILER OFF)
  set(COMFYQUANT_MLIR_DIR "")
endif()

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/comfyquantConfig.cmake.in
  ${PROJECT_BINARY_DIR}/comfyquantConfig.cmake
  INSTALL_DESTINATION ${COMFYQUANT_CMAKE_DIR})
# Pre-1.0 minor versions are not compatible with each other (see the ABI
# check of cq_session_open), later ones within a major version.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(COMFYQUANT_COMPATIBILITY SameMinorVersion)
else()
  set(COMFYQUANT_COMPATIBILITY SameMajorVersion)
endif()
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/comfyquantConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${COMFYQUANT_COMPATIBILITY})
install(FILES ${PROJECT_BINARY_DIR}/comfyquantConfig.cmake
  ${PROJECT_BINARY_DIR}/comfyquantConfigVersion.cmake
  DESTINATION ${COMFYQUANT_CMAKE_DIR})

# pkg-config: the shared library needs nothing else at link time; a static
# libcomfyquant.a brings the C++ runtime and its system libraries.
set(COMFYQUANT_PC_LIBS_PRIVATE "-lstdc++ -lm -ldl -pthread")
if(COMFYQUANT_BUILD_SHARED)
  set(COMFYQUANT_PC_CFLAGS "")
else()
  set(COMFYQUANT_PC_CFLAGS " -DCQ_STATIC")
endif()
# Relocatable: the prefix is found from the .pc file's own directory, so
# `cmake --install --prefix P` needs no reconfiguration.
file(RELATIVE_PATH COMFYQUANT_PC_PREFIX_FROM_PCDIR
  /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" COMFYQUANT_PC_PREFIX_FROM_PCDIR
  "${COMFYQUANT_PC_PREFIX_FROM_PCDIR}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/comfyquant.pc.in
  ${PROJECT_BINARY_DIR}/comfyquant.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/comfyquant.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
