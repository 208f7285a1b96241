# cgad_add_part(NAME SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...]): one part's library (docs/design.md §2), the
# same way for every part -- the static library cgad_NAME and its alias cgad::NAME, the part's include/ folder
# (in the build tree, and include/ below the install prefix), C++20 for it and its users, the export name NAME
# (cgad::NAME in the installed package) -- so a part's CMakeLists.txt holds only what is particular to it.
function(cgad_add_part name)
  cmake_parse_arguments(PART "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  if(NOT PART_SOURCES)
    message(FATAL_ERROR "cgad_add_part(${name}) needs SOURCES")
  endif()
  add_library(cgad_${name} ${PART_SOURCES})
  add_library(cgad::${name} ALIAS cgad_${name})
  target_include_directories(cgad_${name} PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
                                                 $<INSTALL_INTERFACE:include>)
  target_link_libraries(cgad_${name} PUBLIC ${PART_PUBLIC_DEPS} PRIVATE ${PART_PRIVATE_DEPS})
  target_compile_features(cgad_${name} PUBLIC cxx_std_20)
  set_target_properties(cgad_${name} PROPERTIES EXPORT_NAME ${name})
endfunction()
