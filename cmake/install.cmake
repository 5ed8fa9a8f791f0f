# `cmake --install`: the flashcheck executable, the plugin ABI header, the Python bridge and the Python
# kernels, the script of the campaign merge's plots, and a CMake package so that an out-of-tree project writes find_package(flashcheck) and builds a
# plugin with flashcheck_add_plugin() (examples/plugins).
include(CMakePackageConfigHelpers)

# The installed executable keeps finding LibTorch where it was built against it (the torch package of
# FLASHCHECK_PYTHON: LibTorch is linked by full path, so the link-path rule does not cover it), and libfmt
# (CMAKE_INSTALL_RPATH, CMakeLists.txt).
get_filename_component(_torch_lib_dir "${TORCH_LIBRARY}" DIRECTORY)
set_target_properties(flashcheck PROPERTIES INSTALL_RPATH "${_torch_lib_dir};${CMAKE_INSTALL_RPATH}"
                                            INSTALL_RPATH_USE_LINK_PATH TRUE)
install(TARGETS flashcheck RUNTIME DESTINATION bin)
install(FILES ${PROJECT_SOURCE_DIR}/include/flashcheck/plugin.h DESTINATION include/flashcheck)
install(TARGETS flashcheck_plugin_api EXPORT flashcheckTargets)
install(EXPORT flashcheckTargets NAMESPACE flashcheck:: DESTINATION lib/cmake/flashcheck)
if(TARGET flashcheck_python)
  # cli/plugins.cc looks for it at <prefix>/lib/flashcheck, next to the executable's <prefix>/bin.
  # It must load the libpython it was built against (another Python's would crash it).
  get_target_property(_libpython flashcheck_python FLASHCHECK_LIBPYTHON)
  get_filename_component(_libpython_dir "${_libpython}" DIRECTORY)
  set_target_properties(flashcheck_python PROPERTIES INSTALL_RPATH "${_libpython_dir};${CMAKE_INSTALL_RPATH}")
  install(TARGETS flashcheck_python LIBRARY DESTINATION lib/flashcheck)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/kernels/python/flashcheck_kernels DESTINATION share/flashcheck/python
        FILES_MATCHING PATTERN "*.py")
# `flashcheck merge` draws its report.html with it (campaign/merge_report.cc looks in <prefix>/share/flashcheck).
install(FILES ${PROJECT_SOURCE_DIR}/tools/campaign_report.py DESTINATION share/flashcheck)
# The transformers tools: hf-live's Python half, run by the interpreter of the release under test (cli/cmd_hf_live.cc
# looks in <prefix>/share/flashcheck/hf_live), and the cross-check beside it (it imports hf_live's modules).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/tools/hf_live ${PROJECT_SOURCE_DIR}/tools/hf_crosscheck DESTINATION share/flashcheck
        FILES_MATCHING PATTERN "*.py" PATTERN "*.json")
# `flashcheck repro` writes its scripts from these templates (cli/cmd_repro.cc looks in <prefix>/share/flashcheck/repro).
install(FILES ${PROJECT_SOURCE_DIR}/tools/repro/repro_template.py ${PROJECT_SOURCE_DIR}/tools/repro/model_repro_template.py
        DESTINATION share/flashcheck/repro)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/flashcheckConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/flashcheckConfig.cmake INSTALL_DESTINATION lib/cmake/flashcheck)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/flashcheckConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/flashcheckConfig.cmake ${PROJECT_BINARY_DIR}/flashcheckConfigVersion.cmake
        DESTINATION lib/cmake/flashcheck)
