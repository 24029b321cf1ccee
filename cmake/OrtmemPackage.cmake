# Debian packages, built from the default build with `cpack -G DEB` (run in
# the build directory): one per install component (cmake/OrtmemInstall.cmake).
#   ortmem-cts_<version>_amd64.deb      the ortmem-cts binary, spec/ and the report schema;
#                                       its Depends come from dpkg-shlibdeps on the binary
#   ortmem-cts-dev_<version>_amd64.deb  headers, archives, the CMake package and nxmem.pc;
#                                       it depends on the -dev packages the archives were
#                                       built against, since a runner built on them links those
# conformance/tests/debian_package.sh checks both (contents, Depends, a
# certification from an extraction); scripts/deb-chroot-check.sh installs them
# with dpkg -i in a fresh Debian chroot.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ortmem-cts)
set(CPACK_PACKAGE_VENDOR "ortmem-cts")
set(CPACK_PACKAGE_CONTACT "ortmem-cts maintainers <ortmem-cts@invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Conformance test kit for inference-runtime memory contracts")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME ortmem-cts)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
    "Conformance test kit for inference-runtime memory contracts\n Certifies allocators against the ortmem memory contracts (allocator, virtual\n backing, shared mapping, provider-context pins, owning and deferred release)\n and writes JSON reports; nxmem plugins are certified with dlopen.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME ortmem-cts-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "ortmem-cts (= ${PROJECT_VERSION}), cmake (>= 3.25), pkg-config, libgtest-dev, librapidcheck-dev, libbenchmark-dev, nlohmann-json3-dev, libexpected-dev, libsodium-dev")
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "ortmem-cts: headers and CMake package for out-of-tree adapters\n find_package(ortmem-cts) and ortmem_cts_add_certification build a runner\n holding your C++ adapter; nxmem.pc gives the nxmem plugin ABI's C headers.")
include(CPack)
