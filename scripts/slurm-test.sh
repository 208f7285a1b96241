#!/usr/bin/env bash
# CTest test (label slurm, run by .ci/run): a `cgad simulate` sweep on a real Slurm. Installs Debian's Slurm and
# MUNGE if missing (as root), starts a one-node cluster on 127.0.0.1 without systemd — munged, slurmctld and slurmd
# in the foreground of this script, configuration, sockets and spool in a temporary folder, proctrack/linuxproc,
# task/none, no accounting — runs the sweep as a job array through scripts/slurm-sweep.sh (sbatch --wait), and
# checks that the merged result equals the unsharded run byte for byte. The daemons are stopped at the end,
# whatever happens.
#   bash scripts/slurm-test.sh PATH/TO/cgad
set -euo pipefail
cgad="$(realpath "${1:?usage: slurm-test.sh PATH/TO/cgad}")"
root="$(cd "$(dirname "$0")/.." && pwd)"
# Not root: skipped (CTest's SKIP_RETURN_CODE 77), since it must install packages and start daemons as root.
[ "$(id -u)" -eq 0 ] || { echo "slurm-test.sh: skipped: needs root (it installs and starts Slurm)"; exit 77; }

missing=()
for p in slurmctld slurmd slurm-client munge; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[slurm-test] installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi

work="$(mktemp -d /tmp/cgad-slurm.XXXXXX)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work"/{munge,spool/ctld,spool/d,log,parts}
chmod 700 "$work/munge"

# MUNGE with a key of its own (never the machine's), its socket in the work folder; root needs --force.
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge/munge.key"
/usr/sbin/munged --force --foreground --key-file="$work/munge/munge.key" --socket="$work/munge/munge.socket" \
  --pid-file="$work/munge/munged.pid" --log-file="$work/log/munged.log" --seed-file="$work/munge/seed" \
  > "$work/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$work/munge/munge.socket" ] && break; sleep 0.1; done
[ -S "$work/munge/munge.socket" ] || { echo "[slurm-test] munged did not start"; cat "$work/log/munged.log"; exit 1; }

node="$(hostname -s)"
cpus="$(nproc)"
# Two ports free right now (the kernel picks them), neither Slurm's defaults (6817/6818) nor fixed ones: a cluster
# already on this machine is not disturbed, and daemons a killed earlier run left behind do not make this one fail
# with "Address already in use" (which is how a fixed pair 16817/16818 failed once).
free_ports() {
  /usr/bin/python3 -c '
import socket
held = [socket.socket() for _ in range(2)]
for s in held: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in held))'
}
read -r ctld_port slurmd_port < <(free_ports)
cat > "$work/slurm.conf" <<CONF
ClusterName=cgadtest
SlurmctldHost=${node}(127.0.0.1)
SlurmctldPort=${ctld_port}
SlurmdPort=${slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
StateSaveLocation=$work/spool/ctld
SlurmdSpoolDir=$work/spool/d
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
NodeName=${node} NodeAddr=127.0.0.1 CPUs=${cpus} State=UNKNOWN
PartitionName=test Nodes=${node} Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$work/slurm.conf"
/usr/sbin/slurmctld -D -i -f "$SLURM_CONF" > "$work/log/slurmctld.out" 2>&1 &
pids+=($!)
/usr/sbin/slurmd -D -f "$SLURM_CONF" > "$work/log/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  state="$(sinfo -h -N -o '%T' 2>/dev/null | head -n 1 || true)"
  [ "$state" = "idle" ] && break
  sleep 0.2
done
if [ "${state:-}" != "idle" ]; then
  echo "[slurm-test] the node did not come up (state '${state:-none}')"
  tail -n 20 "$work/log/slurmctld.log" "$work/log/slurmd.log" || true
  exit 1
fi
echo "[slurm-test] one-node cluster up: $(sinfo -h -o '%P %a %D %T')"

# A small sweep of 24 runs in 4 shards, and the same sweep unsharded.
sweep=(--objective nqm --size 64 --optimizer cgad,adam-decay,nesterov --tau 0,4 --seeds 4 --rounds 40)
CGAD="$cgad" bash "$root/scripts/slurm-sweep.sh" 4 "$work/parts" -- "${sweep[@]}" --json > "$work/merged.json"
"$cgad" simulate "${sweep[@]}" --json > "$work/unsharded.json"
if cmp -s "$work/merged.json" "$work/unsharded.json"; then
  echo "[slurm-test] merged job array equals the unsharded sweep byte for byte ($(wc -c < "$work/merged.json") bytes)"
  echo "1 passed, 0 failed"
else
  echo "[slurm-test] the merged job array differs from the unsharded sweep"
  diff <(head -c 2000 "$work/merged.json") <(head -c 2000 "$work/unsharded.json") | head -n 20 || true
  echo "0 passed, 1 failed"
  exit 1
fi
