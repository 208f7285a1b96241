# CTest script (proptests/install/CMakeLists.txt, label ci): installs the build in BUILD_DIR into a fresh prefix, then
# configures, builds and runs examples/cpp_consumer against that prefix alone. Any failing stage fails the test.
# Its fastpath_consumer asks the package for cgad::fastpath alone (find_package COMPONENTS), configures where
# pkg-config finds no MPFR or GMP, and must compile and link no arbitrary-precision library (docs/design.md §2): no
# Boost.Multiprecision, mpfr.h or gmp.h in the header closure of its source (the compiler's own -H list, with the
# build's exact compile command), no MPFR or GMP on its link line, none in its binary's NEEDED, and no MPFR or GMP
# symbol referred to anywhere in the installed fast-path, core and io libraries.
# Last, no installed target imposes -ffp-contract on its users, and a consumer compiled with fma contraction gets cgad's
# own bits (proptests/install/contraction).
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DCONTRACTION_PROBE=... -P test_install_consumer.cmake
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR CONTRACTION_PROBE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "test_install_consumer.cmake needs -D${var}=...")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
set(consumer "${WORK_DIR}/consumer")
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
endfunction()
run("install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
foreach(file include/cgad/fastpath/fastpath.hpp include/cgad/core/gate.hpp include/cgad/reference/optimizers.hpp
             lib/cmake/cgad/cgadConfig.cmake lib/cmake/cgad/cgadConfigVersion.cmake lib/cmake/cgad/FindMPFI.cmake bin/cgad
             share/doc/cgad/LICENSE)
  if(NOT EXISTS "${prefix}/${file}")
    message(FATAL_ERROR "the install lacks ${file}")
  endif()
endforeach()
# A machine without MPFR or GMP, as the package sees it: pkg-config (the only way it finds them) finds nothing. The
# whole package must then fail to configure (the check below can fail), and its fast path alone must not.
set(no_libraries "${WORK_DIR}/no-pkg-config")
file(MAKE_DIRECTORY "${no_libraries}")
set(without_mpfr ${CMAKE_COMMAND} -E env PKG_CONFIG_LIBDIR=${no_libraries} PKG_CONFIG_PATH=)
execute_process(COMMAND ${without_mpfr} ${CMAKE_COMMAND} -S "${SOURCE_DIR}/examples/cpp_consumer" -B "${WORK_DIR}/whole"
                -DCMAKE_PREFIX_PATH=${prefix} RESULT_VARIABLE rc OUTPUT_VARIABLE err ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "Package 'mpfr'.* not found")
  message(FATAL_ERROR "the whole package configured without pkg-config's MPFR (${rc}), so the fast-path-only check "
                      "below proves nothing:\n${err}")
endif()
message(STATUS "without MPFR on pkg-config's path, find_package(cgad) of every part fails: ok")
# Unix Makefiles, so that the link line is in a known file (link.txt).
run("configure the fast-path-only consumer without MPFR or GMP on pkg-config's path" ${without_mpfr}
    ${CMAKE_COMMAND} -S "${SOURCE_DIR}/examples/cpp_consumer" -B "${consumer}" -DFAST_PATH_ONLY=ON
    -G "Unix Makefiles" -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
run("build the fast-path-only consumer" ${CMAKE_COMMAND} --build "${consumer}" --target fastpath_consumer)

# Its compile command, as the build ran it, rerun with -H -fsyntax-only: every header it reads, one per line.
file(READ "${consumer}/compile_commands.json" commands)
string(JSON count LENGTH "${commands}")
math(EXPR last "${count} - 1")
set(compile "")
foreach(i RANGE ${last})
  string(JSON source GET "${commands}" ${i} file)
  if(source MATCHES "fastpath_only\\.cpp$")
    string(JSON compile GET "${commands}" ${i} command)
    string(JSON directory GET "${commands}" ${i} directory)
  endif()
endforeach()
if(compile STREQUAL "")
  message(FATAL_ERROR "no compile command for fastpath_only.cpp in ${consumer}/compile_commands.json")
endif()
if(compile MATCHES "mpfr|gmp|multiprecision")
  message(FATAL_ERROR "the fast-path-only consumer's compile line names MPFR, GMP or Boost.Multiprecision:\n${compile}")
endif()
separate_arguments(compile_args UNIX_COMMAND "${compile}")
execute_process(COMMAND ${compile_args} -H -fsyntax-only WORKING_DIRECTORY "${directory}" RESULT_VARIABLE rc
                ERROR_VARIABLE headers OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "rerunning the consumer's compile command with -H failed (${rc}):\n${headers}")
endif()
string(REGEX MATCHALL "[^\n]*(boost/multiprecision|/mpfr\\.h|/gmp\\.h)[^\n]*" heavy "${headers}")
if(heavy)
  list(JOIN heavy "\n" heavy)
  message(FATAL_ERROR "the fast-path-only consumer's header closure holds arbitrary precision:\n${heavy}")
endif()
string(REGEX MATCHALL "\n\\.+ " closure "\n${headers}")
list(LENGTH closure closure_size)
message(STATUS "fastpath_only.cpp reads ${closure_size} headers, none of Boost.Multiprecision, MPFR or GMP")

file(READ "${consumer}/CMakeFiles/fastpath_consumer.dir/link.txt" link)
if(link MATCHES "mpfr|gmp")
  message(FATAL_ERROR "the fast-path-only consumer's link line names MPFR or GMP:\n${link}")
endif()
find_program(READELF readelf REQUIRED)
execute_process(COMMAND ${READELF} -d "${consumer}/fastpath_consumer" OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR dynamic MATCHES "libmpfr|libgmp")
  message(FATAL_ERROR "the fast-path-only consumer's binary needs MPFR or GMP (readelf -d, status ${rc}):\n${dynamic}")
endif()
message(STATUS "the fast-path-only consumer links neither libmpfr nor libgmp")
# The consumer above uses part of the fast path; a static library's other objects are linked only when used. So
# the installed fast path (and the core and io it needs) must not refer to MPFR or GMP anywhere (nm's undefined
# symbols): an object that did would fail to link for the user who calls it.
find_program(NM nm REQUIRED)
foreach(library cgad_fastpath cgad_core cgad_io)
  file(GLOB archive "${prefix}/lib*/lib${library}.a")
  execute_process(COMMAND ${NM} --undefined-only "${archive}" OUTPUT_VARIABLE undefined RESULT_VARIABLE rc)
  string(REGEX MATCHALL "[^\n]* U (mpfr_|__gmp)[^\n]*" heavy "${undefined}")
  if(NOT rc EQUAL 0 OR heavy)
    message(FATAL_ERROR "the installed ${library} (${archive}) refers to MPFR or GMP (nm, status ${rc}):\n${heavy}")
  endif()
endforeach()
run("run the fast-path-only consumer" "${consumer}/fastpath_consumer")

run("configure the consumer of the fast path and the reference" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/examples/cpp_consumer"
    -B "${WORK_DIR}/both" -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run("build the consumer of the fast path and the reference" ${CMAKE_COMMAND} --build "${WORK_DIR}/both")
run("run the consumer of the fast path and the reference" "${WORK_DIR}/both/consumer")

# -ffp-contract=off is no usage requirement (docs/design.md §2): the contraction consumer refuses to configure if an
# installed target carries it, and is compiled with -ffp-contract=fast -mfma. Its "cgad" lines (core, reference and
# fast path on inputs where an fma changes the result) must equal those of CONTRACTION_PROBE, the same program in
# cgad's build, and its "canary" lines (a formula of its own) must differ, or the comparison would show nothing.
file(READ /proc/cpuinfo cpuinfo)
if(NOT cpuinfo MATCHES "\nflags[^\n]* fma[ \n]")
  message(FATAL_ERROR "this CPU has no FMA (/proc/cpuinfo): the contraction consumer (-mfma) cannot run here")
endif()
run("configure the contraction consumer" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/proptests/install/contraction"
    -B "${WORK_DIR}/contraction" -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run("build the contraction consumer" ${CMAKE_COMMAND} --build "${WORK_DIR}/contraction")
set(probe_installed "${WORK_DIR}/contraction/contraction_probe")
set(probe_own "${CONTRACTION_PROBE}")
foreach(side installed own)
  set(probe "${probe_${side}}")
  execute_process(COMMAND "${probe}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${probe} failed (${rc}):\n${err}")
  endif()
  string(REGEX MATCHALL "cgad [^\n]*" ${side}_cgad "${out}")
  string(REGEX MATCHALL "canary [^\n]*" ${side}_canary "${out}")
endforeach()
if(NOT installed_cgad OR NOT installed_canary)
  message(FATAL_ERROR "the contraction consumer printed no cgad or no canary line")
endif()
if(installed_canary STREQUAL own_canary)
  message(FATAL_ERROR "the contraction consumer's canary equals cgad's build's: contraction did not change it, so the "
                      "comparison shows nothing")
endif()
list(LENGTH installed_cgad lines)
list(LENGTH own_cgad own_lines)
if(NOT lines EQUAL own_lines)
  message(FATAL_ERROR "the contraction consumer printed ${lines} cgad lines, cgad's build ${own_lines}")
endif()
math(EXPR last "${lines} - 1")
foreach(i RANGE ${last})
  list(GET installed_cgad ${i} mine)
  list(GET own_cgad ${i} theirs)
  if(NOT mine STREQUAL theirs)
    message(FATAL_ERROR "compiled with fma contraction, a consumer gets other bits than cgad's build:\n"
                        "consumer:     ${mine}\ncgad's build: ${theirs}")
  endif()
endforeach()
message(STATUS "the contraction consumer's canary differs from cgad's build's and its ${lines} cgad lines are equal")
