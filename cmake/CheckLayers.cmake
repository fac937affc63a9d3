# The layers of src/ and what each may include (docs/internals/layout.md). Run by the build
# (`cmake -P cmake/CheckLayers.cmake` from the `layers` target): a file that includes a header of a
# folder its layer may not reach fails the build, naming the file, the line and the rule, so that the
# layout stays the architecture and not a convention. A folder of src/ (or of a folder of src/)
# missing from this table fails too: a new layer is a new row here.
#
# Each row: a folder under src/, then what its files may include besides their own folder's headers.
# An entry is a folder (its headers, and those of the folders inside it: "relay" from relayd reaches
# every feature of the relay) or one header (a feature's declared interface to another feature:
# "relay/turn/deltas.h" lets a feature call what that header declares and nothing else of the turn).
#
# src/relay is split by feature (docs/internals/layout.md, "The relay by feature"): relay/core is
# what every feature uses and includes no feature; a feature includes core and the layers below, and
# of another feature only the headers its row names; src/relay itself (start, stop, the route table,
# the sweeps) assembles the features and may include them all.
#
# An entry "!header" refuses that one header even where a folder entry would allow it. A feature that
# has a context of its own (rl_<feature>_ctx_t, filled by relay.c) names "!relay/core/relay.h": it
# reaches the services through its context, never the whole relay, and an include of relay.h (the
# struct of every service) fails the build. RL_RELAY_CONTAINED lists those features.
set(RL_RELAY_BELOW "common http store bus auth push")
set(RL_RELAY_CONTAINED "!relay/core/relay.h")
set(RL_LAYERS
  "common:"
  "http:common"
  "store:common"
  "bus:common http"
  "auth:common http"
  "push:common http auth"
  "e2e:common"
  "relay/core:${RL_RELAY_BELOW}"
  "relay/push:${RL_RELAY_BELOW} relay/core ${RL_RELAY_CONTAINED}"
  "relay/identity:${RL_RELAY_BELOW} relay/core relay/push/push.h ${RL_RELAY_CONTAINED}"
  "relay/installations:${RL_RELAY_BELOW} relay/core relay/media/attachments.h relay/e2e/e2e.h ${RL_RELAY_CONTAINED}"
  "relay/e2e:${RL_RELAY_BELOW} relay/core relay/sessions/sessions.h ${RL_RELAY_CONTAINED}"
  "relay/media:${RL_RELAY_BELOW} relay/core relay/turn/deltas.h relay/turn/bridge.h relay/e2e/e2e.h ${RL_RELAY_CONTAINED}"
  "relay/turn:${RL_RELAY_BELOW} relay/core relay/media/attachments.h relay/media/capabilities.h relay/e2e/e2e.h relay/sessions/sessions.h relay/installations/manifest.h relay/push/push.h ${RL_RELAY_CONTAINED}"
  "relay/sessions:${RL_RELAY_BELOW} relay/core relay/turn/approvals.h relay/turn/deltas.h relay/turn/messages.h relay/media/attachments.h relay/e2e/e2e.h relay/installations/manifest.h ${RL_RELAY_CONTAINED}"
  "relay:${RL_RELAY_BELOW} relay"
  "relayd:${RL_RELAY_BELOW} relay"
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
# Every folder under src/, at any depth: each is a layer and needs its row.
file(GLOB_RECURSE entries LIST_DIRECTORIES true "${RL_SOURCE_DIR}/src/*")
set(folders "")
foreach(entry ${entries})
  if(IS_DIRECTORY "${entry}")
    list(APPEND folders "${entry}")
  endif()
endforeach()
foreach(folder ${folders})
  file(RELATIVE_PATH layer "${RL_SOURCE_DIR}/src" "${folder}")
  if(NOT layer IN_LIST known)
    message(SEND_ERROR "layers: src/${layer} has no row in cmake/CheckLayers.cmake")
    math(EXPR failures "${failures} + 1")
    continue()
  endif()
  file(GLOB files "${folder}/*.c" "${folder}/*.h")
  foreach(file ${files})
    file(STRINGS "${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"[a-z0-9_]+/")
    foreach(line ${includes})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([a-z0-9_/.]+)\".*" "\\1" header "${line}")
      get_filename_component(target "${header}" DIRECTORY)
      set(ok 0)
      set(refused 0)
      if(target STREQUAL layer)
        set(ok 1)
      endif()
      foreach(entry ${allowed_${layer}})
        string(FIND "${target}/" "${entry}/" at)
        if(header STREQUAL entry OR at EQUAL 0)
          set(ok 1)
        endif()
        if("!${header}" STREQUAL entry)
          set(refused 1)
        endif()
      endforeach()
      file(RELATIVE_PATH rel "${RL_SOURCE_DIR}" "${file}")
      if(refused)
        message(SEND_ERROR "layers: ${rel}: ${line}: src/${layer} has a context of its own and may not include "
                           "${header} (docs/internals/layout.md, \"A feature's context\")")
        math(EXPR failures "${failures} + 1")
        continue()
      endif()
      if(ok)
        continue()
      endif()
      set(reach "${allowed_${layer}}")
      list(FILTER reach EXCLUDE REGEX "^!")
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
