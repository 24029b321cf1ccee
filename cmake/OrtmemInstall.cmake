# What `cmake --install` puts in place, and the CMake package that lets an
# adapter author build a runner of their own (find_package(ortmem-cts)):
#   bin/ortmem-cts                        the kit
#   include/ortmem/                       the contract and the reference mechanisms
#   include/ortmem/cts/                   the adapter author's API
#   include/nxmem/                        the nxmem plugin ABI and the control extension (C)
#   lib/libortmem_*.a                     the kit as archives (ortmem::cts and what it needs)
#   lib/cmake/ortmem-cts/                 the package and ortmem_cts_add_certification
#   lib/pkgconfig/nxmem.pc                the C headers, for a plugin built without CMake
#   share/ortmem-cts/spec, .../schema     the requirements and the report schema
# The CUDA mechanisms stay in the kit's own binary: an installed archive of
# them would make every adapter author link the CUDA toolkit.
# Two components, one Debian package each (cmake/OrtmemPackage.cmake):
# `runtime` (the binary, spec, schema) and `dev` (the rest).
include(CMakePackageConfigHelpers)

set(ORTMEM_CMAKE_PACKAGE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ortmem-cts)
set(ORTMEM_DATA_DIR ${CMAKE_INSTALL_DATADIR}/ortmem-cts)

install(TARGETS ortmem-cts RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)

# Installed names follow the in-tree aliases: ortmem::api, ortmem::cts, ...
set(exported ortmem_api ortmem_mechanism ortmem_host ortmem_report ortmem_cts_core ortmem_cts_runner_core ortmem_adapter_host
             ortmem_adapter_plugin ortmem_nxmem ortmem_cts_kit ortmem_warnings)
foreach(target IN LISTS exported)
  get_target_property(export_name ${target} EXPORT_NAME)
  if(NOT export_name)
    string(REGEX REPLACE "^ortmem_" "" export_name ${target})
    set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
  endif()
endforeach()
install(TARGETS ${exported} EXPORT ortmem-cts-targets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(EXPORT ortmem-cts-targets NAMESPACE ortmem:: DESTINATION ${ORTMEM_CMAKE_PACKAGE_DIR} COMPONENT dev)

install(DIRECTORY reference/include/ortmem DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev
        PATTERN cuda EXCLUDE)
install(DIRECTORY conformance/include/ortmem/cts DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ortmem COMPONENT dev)
install(DIRECTORY adapters/plugin/include/nxmem DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(DIRECTORY spec/ DESTINATION ${ORTMEM_DATA_DIR}/spec COMPONENT runtime FILES_MATCHING PATTERN "*.json" PATTERN "*.md")
install(FILES reports/schema/report.schema.json DESTINATION ${ORTMEM_DATA_DIR}/schema COMPONENT runtime)

configure_package_config_file(cmake/ortmem-cts-config.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/ortmem-cts-config.cmake
                              INSTALL_DESTINATION ${ORTMEM_CMAKE_PACKAGE_DIR}
                              PATH_VARS ORTMEM_DATA_DIR)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ortmem-cts-config-version.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ortmem-cts-config.cmake ${CMAKE_CURRENT_BINARY_DIR}/ortmem-cts-config-version.cmake
              cmake/OrtmemCtsCertification.cmake
        DESTINATION ${ORTMEM_CMAKE_PACKAGE_DIR} COMPONENT dev)

# Relative to the .pc file, so `cmake --install --prefix` anywhere stays right.
file(RELATIVE_PATH ORTMEM_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(cmake/nxmem.pc.in ${CMAKE_CURRENT_BINARY_DIR}/nxmem.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/nxmem.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
