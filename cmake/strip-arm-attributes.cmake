# SPDX-License-Identifier: Apache-2.0

# cmake -DDIR=… -DOBJCOPY=… -P strip-arm-attributes.cmake: removes the ARM
# build attributes (.ARM.attributes) from every object file in DIR, in
# place. CMakeLists.txt uses it on the Embedded Swift Unicode tables of an
# armv7 cross build (see there why).
file(GLOB _objects "${DIR}/*.o")
foreach(_o IN LISTS _objects)
  execute_process(COMMAND "${OBJCOPY}" --remove-section=.ARM.attributes "${_o}" RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${OBJCOPY} failed on ${_o}")
  endif()
endforeach()
