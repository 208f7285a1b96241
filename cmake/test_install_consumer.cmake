# CTest script (proptests/install/CMakeLists.txt, label ci): installs the build in BUILD_DIR into a fresh prefix, then
# configures, builds and runs examples/cpp_consumer against that prefix alone. Any failing stage fails the test.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -P test_install_consumer.cmake
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "test_install_consumer.cmake needs -D${var}=...")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
endfunction()
run("install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
foreach(file include/cgad/fastpath/fastpath.hpp include/cgad/reference/gate.hpp lib/cmake/cgad/cgadConfig.cmake
             lib/cmake/cgad/cgadConfigVersion.cmake lib/cmake/cgad/FindMPFI.cmake bin/cgad share/doc/cgad/LICENSE)
  if(NOT EXISTS "${prefix}/${file}")
    message(FATAL_ERROR "the install lacks ${file}")
  endif()
endforeach()
run("configure the consumer" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/examples/cpp_consumer" -B "${WORK_DIR}/consumer"
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run("build the consumer" ${CMAKE_COMMAND} --build "${WORK_DIR}/consumer")
run("run the consumer" "${WORK_DIR}/consumer/consumer")
