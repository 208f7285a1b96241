# cgad_write_dist_info(OUT_DIR): the package's dist-info (METADATA, INSTALLER, top_level.txt) for the CMake build
# tree (build/python) and `cmake --install`, the offline route where no build backend runs (Debian 12 packages no
# scikit-build-core): importlib.metadata then answers there as it does for a pip install. Name, summary, Python
# requirement and dependencies are read from pyproject.toml's [project] table, the version from VERSION (through
# PROJECT_VERSION) -- the sources scikit-build-core writes the wheel's dist-info from. Only the forms
# pyproject.toml uses are read: `key = "text"` on one line, `key = ["a", "b"]` on one line or several (a CMake list
# is not split inside [ ], so file(STRINGS) hands an array over several lines on as one element); a missing key or
# another form stops the configure, so a reformatted pyproject.toml cannot silently drop a requirement. No RECORD:
# CMake's install_manifest.txt removes what it installed, not pip.

function(_cgad_toml_list text out)  # ["a", "b"] -> a;b
  string(REGEX MATCHALL "\"[^\"]*\"" items "${text}")
  string(REPLACE "\"" "" items "${items}")
  set(${out} "${items}" PARENT_SCOPE)
endfunction()

function(cgad_write_dist_info out_dir)
  set(pyproject ${PROJECT_SOURCE_DIR}/pyproject.toml)
  file(STRINGS ${pyproject} lines)
  set(section "")
  set(extras "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^\\[([^]]+)\\]")
      set(section "${CMAKE_MATCH_1}")
    elseif(section STREQUAL "project" AND line MATCHES "^(name|description|requires-python) = \"([^\"]*)\"$")
      set(project_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
    elseif(section STREQUAL "project" AND line MATCHES "^dependencies = (.*)$")
      set(value "${CMAKE_MATCH_1}")  # the next MATCHES resets CMAKE_MATCH_<n>
      if(NOT value MATCHES "^\\[.*\\]$")
        message(FATAL_ERROR "${pyproject}: write [project] dependencies as an array of strings, [\"a\", \"b\"]")
      endif()
      _cgad_toml_list("${value}" project_dependencies)
      set(project_dependencies_read TRUE)
    elseif(section STREQUAL "project.optional-dependencies" AND line MATCHES "^([A-Za-z0-9_-]+) = (.*)$")
      set(extra "${CMAKE_MATCH_1}")
      set(value "${CMAKE_MATCH_2}")
      if(NOT value MATCHES "^\\[.*\\]$")
        message(FATAL_ERROR "${pyproject}: write the extra '${extra}' as an array of strings, [\"a\", \"b\"]")
      endif()
      _cgad_toml_list("${value}" extra_${extra})
      list(APPEND extras ${extra})
    endif()
  endforeach()
  foreach(key name description requires-python)
    if(NOT DEFINED project_${key})
      message(FATAL_ERROR "${pyproject}: no one-line `${key} = \"...\"` in [project]")
    endif()
  endforeach()
  if(NOT project_dependencies_read)
    message(FATAL_ERROR "${pyproject}: no `dependencies = [...]` in [project]")
  endif()

  file(GLOB stale LIST_DIRECTORIES TRUE ${out_dir}/${project_name}-*.dist-info)
  if(stale)
    file(REMOVE_RECURSE ${stale})
  endif()
  set(info ${out_dir}/${project_name}-${PROJECT_VERSION}.dist-info)
  set(metadata "Metadata-Version: 2.1\nName: ${project_name}\nVersion: ${PROJECT_VERSION}\n")
  string(APPEND metadata "Summary: ${project_description}\nRequires-Python: ${project_requires-python}\n")
  foreach(requirement IN LISTS project_dependencies)
    string(APPEND metadata "Requires-Dist: ${requirement}\n")
  endforeach()
  foreach(extra IN LISTS extras)
    string(APPEND metadata "Provides-Extra: ${extra}\n")
    foreach(requirement IN LISTS extra_${extra})
      string(APPEND metadata "Requires-Dist: ${requirement} ; extra == \"${extra}\"\n")
    endforeach()
  endforeach()
  file(WRITE ${info}/METADATA "${metadata}")
  file(WRITE ${info}/INSTALLER "cmake\n")
  file(WRITE ${info}/top_level.txt "${project_name}\n")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${pyproject})
endfunction()
