#!/usr/bin/env bash
# A `cgad simulate` sweep as a Slurm job array: N shards (`--shard I/N`), one array task each, then one
# `cgad merge` of their parts, which prints exactly what the unsharded sweep prints (and refuses missing,
# duplicate or foreign parts).
#   scripts/slurm-sweep.sh N OUTDIR [sbatch options ...] -- [cgad simulate options ...]
# e.g. scripts/slurm-sweep.sh 16 sweep-parts --partition=cpu --time=01:00:00 -- --objective teacher-student \
#        --optimizer cgad,adam-decay --tau 4,16 --seeds 16 --rounds 2000
# CGAD (default: ./build/apps/cgad/cgad, made absolute) must be reachable from the compute nodes; OUTDIR too.
# The merged result goes to stdout in the format of the last merge option given after `--` (--json, --csv or the
# table); the parts stay in OUTDIR. sbatch --wait makes this script return when the array is done, with
# sbatch's status: nonzero if any task failed.
set -euo pipefail
usage() { echo "usage: slurm-sweep.sh N OUTDIR [sbatch options ...] -- [cgad simulate options ...]" >&2; exit 2; }
[ $# -ge 3 ] || usage
shards="$1"; outdir="$2"; shift 2
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || { echo "slurm-sweep.sh: N must be a positive integer, got '$shards'" >&2; exit 2; }
sbatch_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do sbatch_args+=("$1"); shift; done
[ "${1:-}" = "--" ] || usage
shift
simulate_args=()
output_args=()
for arg in "$@"; do
  case "$arg" in
    --json|--csv) output_args=("$arg") ;;  # for the merge; a shard only writes its part
    *) simulate_args+=("$arg") ;;
  esac
done
cgad="$(realpath "${CGAD:-./build/apps/cgad/cgad}")"
[ -x "$cgad" ] || { echo "slurm-sweep.sh: no cgad binary at $cgad (set CGAD)" >&2; exit 2; }
mkdir -p "$outdir"
outdir="$(realpath "$outdir")"
# The array task's script: its shard of the sweep, written atomically by cgad into OUTDIR.
job="$outdir/shard.sh"
{
  echo '#!/usr/bin/env bash'
  echo 'set -euo pipefail'
  printf 'exec %q simulate' "$cgad"
  [ ${#simulate_args[@]} -eq 0 ] || printf ' %q' "${simulate_args[@]}"
  printf ' --shard "${SLURM_ARRAY_TASK_ID}/%s" --out %q/part-"${SLURM_ARRAY_TASK_ID}".json\n' "$shards" "$outdir"
} > "$job"
chmod +x "$job"
sbatch --wait --array="0-$((shards - 1))" --job-name=cgad-sweep --output="$outdir/shard-%a.log" \
  ${sbatch_args[@]+"${sbatch_args[@]}"} "$job" >&2
parts=()
for ((i = 0; i < shards; i++)); do parts+=("$outdir/part-$i.json"); done
exec "$cgad" merge "${parts[@]}" ${output_args[@]+"${output_args[@]}"}
