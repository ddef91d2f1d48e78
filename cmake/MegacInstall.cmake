# `cmake --install build --prefix P`: megac and what it reads at run time, laid out as
# tools/megac/MegacPaths.cpp looks for it beside P/bin/megac (keep the two in step):
#   P/bin            megac, megac-opt, megart-calibrate
#   P/lib            libmegart.a (and libmegart-cuda.a); lib/megac/pch: the precompiled header
#   P/include        the runtime's headers (megart/, megart/cuda/)
#   P/share/megac    megac_tokenizer.py, clusters/, examples/, runtime/ (the runtime's source, which
#                    OUT/CMakeLists.txt builds on other machines)
# The runtime and the precompiled header target this machine's CPU (-march=native unless
# MEGART_PORTABLE), as the build tree's do: install on the machine that compiles the programs.

# megac links Debian's libMLIR.so from /usr/lib/llvm-22/lib: keep the link folders as the rpath.
set(megac_installed_tools megac megac-opt)
if(TARGET megart-calibrate)
  list(APPEND megac_installed_tools megart-calibrate)
endif()
set_target_properties(${megac_installed_tools} PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS ${megac_installed_tools} RUNTIME DESTINATION bin)

install(TARGETS megart ARCHIVE DESTINATION lib)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/ DESTINATION include)
# The .gch megac compile puts first on the include path (GCC falls back to the header when the
# flags differ, so a stale one costs time, never correctness).
install(FILES ${MEGART_PCH_DIR}/megart/cpu_program.h.gch DESTINATION lib/megac/pch/megart)
if(TARGET megart-cuda)
  install(TARGETS megart-cuda ARCHIVE DESTINATION lib)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/cuda/include/ DESTINATION include)
endif()

install(FILES ${PROJECT_SOURCE_DIR}/tools/megac/megac_tokenizer.py DESTINATION share/megac)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/clusters ${PROJECT_SOURCE_DIR}/examples DESTINATION share/megac)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime DESTINATION share/megac)
