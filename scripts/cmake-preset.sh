# Sourced by the scripts that configure: cmake_configure PRESET DIR [CMAKE_ARGS...] configures DIR from
# CMakePresets.json's PRESET (run from the repository root, or pass -S). The presets use Ninja; a build folder
# configured before them with another generator (Make) keeps it, since CMake refuses to switch a folder's
# generator, so no existing build folder has to be removed.
cmake_configure() {
  local preset="$1" dir="$2" generator=()
  shift 2
  if [ -f "$dir/CMakeCache.txt" ]; then
    local used
    used="$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$dir/CMakeCache.txt")"
    if [ -n "$used" ] && [ "$used" != "Ninja" ]; then generator=(-G "$used"); fi
  fi
  cmake --preset "$preset" "${generator[@]}" "$@"
}
