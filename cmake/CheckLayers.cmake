# The layers of src/ and what each may include (docs/internals/layout.md). Run by the build
# (`cmake -P cmake/CheckLayers.cmake` from the `layers` target): a file that includes a header of a
# folder its layer may not reach fails the build, naming the file, the line and the rule, so that the
# layout stays the architecture and not a convention. A folder of src/ missing from this table fails
# too: a new layer is a new row here.
#
# Each row: a folder of src/, then the folders its files may include besides their own.
set(RL_LAYERS
  "common:"
  "http:common"
  "store:common"
  "bus:common http"
  "auth:common http"
  "push:common http auth"
  "e2e:common"
  "relay:common http store bus auth push"
  "relayd:common http store bus auth push relay"
  "client:common e2e"
  "bridge:common client e2e"
  "catalog:common http"
)

cmake_minimum_required(VERSION 3.18)

if(NOT DEFINED RL_SOURCE_DIR)
  get_filename_component(RL_SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
endif()

set(known "")
foreach(row ${RL_LAYERS})
  string(REPLACE ":" ";" parts "${row}")
  list(GET parts 0 layer)
  list(APPEND known ${layer})
  set(allowed_${layer} "")
  list(LENGTH parts n)
  if(n GREATER 1)
    list(GET parts 1 deps)
    string(REPLACE " " ";" allowed_${layer} "${deps}")
  endif()
endforeach()

set(failures 0)
file(GLOB folders LIST_DIRECTORIES true "${RL_SOURCE_DIR}/src/*")
foreach(folder ${folders})
  if(NOT IS_DIRECTORY "${folder}")
    continue()
  endif()
  get_filename_component(layer "${folder}" NAME)
  if(NOT layer IN_LIST known)
    message(SEND_ERROR "layers: src/${layer} has no row in cmake/CheckLayers.cmake")
    math(EXPR failures "${failures} + 1")
    continue()
  endif()
  file(GLOB files "${folder}/*.c" "${folder}/*.h")
  foreach(file ${files})
    file(STRINGS "${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"[a-z0-9_]+/")
    foreach(line ${includes})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([a-z0-9_]+)/.*" "\\1" target "${line}")
      if(target STREQUAL layer OR target IN_LIST allowed_${layer})
        continue()
      endif()
      file(RELATIVE_PATH rel "${RL_SOURCE_DIR}" "${file}")
      set(reach "${allowed_${layer}}")
      if(reach STREQUAL "")
        set(reach "nothing outside itself")
      endif()
      string(REPLACE ";" ", " reach "${reach}")
      message(SEND_ERROR "layers: ${rel}: ${line}: src/${layer} may include ${reach}")
      math(EXPR failures "${failures} + 1")
    endforeach()
  endforeach()
endforeach()

if(failures GREATER 0)
  message(FATAL_ERROR "layers: ${failures} include(s) climb the wrong way (cmake/CheckLayers.cmake)")
endif()
