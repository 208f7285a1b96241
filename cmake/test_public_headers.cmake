# CTest script (proptests/fastpath/CMakeLists.txt, label ci): no public header of the fast path reaches a header of
# cgad/fastpath/detail/, directly or through another header (docs/design.md §2, "Public headers"). The public headers
# (fastpath/include/cgad/fastpath/*.hpp, not detail/) are copied alone into WORK_DIR, and each is compiled by itself
# (-fsyntax-only) with that copy and core's headers as the only include paths, so an include of detail/ anywhere in
# its closure is a missing file. Two checks keep it from passing vacuously: the copy must hold the headers named
# below, and a translation unit that includes a detail/ header must fail to compile on the same paths.
#   cmake -DSOURCE_DIR=... -DWORK_DIR=... -DCXX=... -P test_public_headers.cmake
cmake_minimum_required(VERSION 3.25)
foreach(var SOURCE_DIR WORK_DIR CXX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "test_public_headers.cmake needs -D${var}=...")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
set(public "${WORK_DIR}/include/cgad/fastpath")
file(GLOB headers RELATIVE "${SOURCE_DIR}/fastpath/include/cgad/fastpath"
     "${SOURCE_DIR}/fastpath/include/cgad/fastpath/*.hpp")
foreach(required fastpath.hpp table_stepper.hpp state_file.hpp bf16.hpp config.hpp cuda_optimizer.hpp)
  if(NOT required IN_LIST headers)
    message(FATAL_ERROR "no public header ${required} in ${SOURCE_DIR}/fastpath/include/cgad/fastpath")
  endif()
endforeach()
file(MAKE_DIRECTORY "${public}")
foreach(header ${headers})
  file(COPY "${SOURCE_DIR}/fastpath/include/cgad/fastpath/${header}" DESTINATION "${public}")
endforeach()
set(compile "${CXX}" -std=c++20 -fsyntax-only -I "${WORK_DIR}/include" -I "${SOURCE_DIR}/core/include")

function(compiles header out_rc out_err)
  string(MAKE_C_IDENTIFIER "${header}" name)
  set(unit "${WORK_DIR}/${name}.cpp")
  file(WRITE "${unit}" "#include \"cgad/fastpath/${header}\"\n")
  execute_process(COMMAND ${compile} "${unit}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(${out_rc} ${rc} PARENT_SCOPE)
  set(${out_err} "${out}${err}" PARENT_SCOPE)
endfunction()

compiles(detail/step_planner.hpp rc err)
if(rc EQUAL 0)
  message(FATAL_ERROR "a detail/ header compiles on the public headers' include paths: the check below cannot fail")
endif()
set(failed "")
foreach(header ${headers})
  compiles(${header} rc err)
  if(rc EQUAL 0)
    message(STATUS "${header}: compiles without detail/")
  else()
    string(APPEND failed "\n${header} does not compile without detail/:\n${err}")
  endif()
endforeach()
if(failed)
  message(FATAL_ERROR "public headers of the fast path need detail/:${failed}")
endif()
