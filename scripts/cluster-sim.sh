#!/usr/bin/env bash
# A small cluster on one machine, for MPI jobs whose bytes cross a network: K "hosts", each a
# network namespace with its own host name (a UTS namespace per launched process), on a
# bridge, reached by OpenMPI through a launch agent instead of ssh, with the TCP transport
# forced so that no rank reaches another through shared memory.
#
#   scripts/cluster-sim.sh [--hosts K] [--ranks-per-host R] [--rate RATE]
#                          [--cut-host N --cut-after S [--restore-after S]] -- COMMAND...
#
#   --hosts K            hosts to create (default 2)
#   --ranks-per-host R   MPI ranks per host (default 1): the job has K·R ranks
#   --rate RATE          limit each host's link, both ways, with a token bucket (tc tbf), e.g.
#                        1gbit or 10gbit; default: no limit (the veth's own speed)
#   --cut-host N         take host N's link down (1-based) --cut-after S seconds after the
#                        job starts; with --restore-after S, bring it back S seconds later
#
# COMMAND runs under mpirun across the hosts, e.g.
#   scripts/cluster-sim.sh --hosts 2 -- target/release/parbench data-parallel --backend mpi
# Its exit code is the script's. Needs root and iproute2 (ip, tc); OpenMPI 4's mpirun.
# Everything it creates carries a name with this run's id (printed at the start) and is
# removed on exit, after a failure or an interrupt too, with any process left in its
# namespaces; nothing else is touched.
set -euo pipefail

hosts=2 per_host=1 rate='' cut_host='' cut_after='' restore_after=''
while [ $# -gt 0 ]; do
  case $1 in
    --hosts) hosts=${2:?--hosts needs a number}; shift 2 ;;
    --ranks-per-host) per_host=${2:?--ranks-per-host needs a number}; shift 2 ;;
    --rate) rate=${2:?--rate needs a rate such as 1gbit}; shift 2 ;;
    --cut-host) cut_host=${2:?--cut-host needs a host number}; shift 2 ;;
    --cut-after) cut_after=${2:?--cut-after needs seconds}; shift 2 ;;
    --restore-after) restore_after=${2:?--restore-after needs seconds}; shift 2 ;;
    --) shift; break ;;
    *) echo "error: unknown option '$1' (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "error: no command to run: $0 [options] -- COMMAND..." >&2; exit 2; }
for n in "$hosts" "$per_host"; do
  case $n in '' | *[!0-9]* | 0) echo "error: --hosts and --ranks-per-host take a positive whole number, not '$n'" >&2; exit 2 ;; esac
done
[ "$hosts" -le 200 ] || { echo "error: at most 200 hosts" >&2; exit 2; }
if [ -n "$cut_host" ]; then
  case $cut_host in *[!0-9]* | 0) echo "error: --cut-host takes a host number from 1 to $hosts" >&2; exit 2 ;; esac
  [ "$cut_host" -le "$hosts" ] || { echo "error: --cut-host $cut_host: there are $hosts hosts" >&2; exit 2; }
  [ -n "$cut_after" ] || { echo "error: --cut-host needs --cut-after SECONDS" >&2; exit 2; }
fi
[ "$(id -u)" -eq 0 ] || { echo "error: cluster-sim.sh needs root (network namespaces)" >&2; exit 2; }
for tool in ip tc mpirun unshare; do
  command -v "$tool" > /dev/null || { echo "error: cluster-sim.sh needs '$tool'" >&2; exit 2; }
done

# This run's id: short, so interface names stay within 15 characters.
id=$(printf '%04x' $(($$ % 65536)))
bridge=pbb$id
subnet_byte=$((100 + $$ % 100))
net=10.$subnet_byte.0
work=$(mktemp -d "/tmp/cluster-sim-$id.XXXXXX")
created_ns=() created_links=()

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  [ -n "${cutter:-}" ] && kill "$cutter" 2> /dev/null || true
  # A namespace lives on while a process is in it (an MPI daemon cut off from mpirun stays):
  # end those first.
  for ns in "${created_ns[@]}"; do
    ip netns pids "$ns" 2> /dev/null | xargs -r kill -KILL 2> /dev/null || true
    ip netns del "$ns" 2> /dev/null || true
  done
  for link in "${created_links[@]}"; do ip link del "$link" 2> /dev/null || true; done
  rm -rf "$work"
  echo "cluster-sim $id: removed ${#created_ns[@]} namespace(s) and ${#created_links[@]} link(s)" >&2
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ip link add "$bridge" type bridge
created_links+=("$bridge")
ip addr add "$net.1/24" dev "$bridge"
ip link set "$bridge" up

hostfile=$work/hostfile
agent=$work/agent
{
  echo '#!/bin/sh'
  echo '# The launch agent: mpirun calls it as it would call ssh (host, then the command).'
  echo 'host=$1; shift'
  echo 'case $host in'
} > "$agent"
for i in $(seq 1 "$hosts"); do
  ns=pbsim-$id-h$i
  name=pbhost$i
  outer=pbv${id}h$i
  addr=$net.$((10 + i))
  ip netns add "$ns"
  created_ns+=("$ns")
  ip link add "$outer" type veth peer name eth0 netns "$ns"
  created_links+=("$outer")
  ip link set "$outer" master "$bridge" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
  if [ -n "$rate" ]; then
    tc qdisc add dev "$outer" root tbf rate "$rate" burst 1mb latency 100ms
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 1mb latency 100ms
  fi
  echo "$name slots=$per_host" >> "$hostfile"
  echo "  $name | $addr) exec ip netns exec $ns unshare --uts sh -c \"hostname $name; \$*\" ;;" >> "$agent"
  echo "cluster-sim $id: host $i: $name at $addr in namespace $ns (link $outer${rate:+, $rate each way})" >&2
done
{
  echo '  *) echo "cluster-sim agent: unknown host $host" >&2; exit 255 ;;'
  echo 'esac'
} >> "$agent"
chmod +x "$agent"

ranks=$((hosts * per_host))
# --bind-to none: the hosts share this machine's cores, and mpirun would bind each host's
# first rank to the same core 0.
mpi=(mpirun --allow-run-as-root --oversubscribe -n "$ranks" --hostfile "$hostfile" --bind-to none
  --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1
  --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$net.0/24"
  --mca oob_tcp_if_include "$net.0/24"
  --mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3)
echo "cluster-sim $id: ${mpi[*]} $*" >&2

if [ -n "$cut_host" ]; then
  (
    sleep "$cut_after"
    ip link set "pbv${id}h$cut_host" down
    echo "cluster-sim $id: cut host $cut_host's link after ${cut_after} s" >&2
    if [ -n "$restore_after" ]; then
      sleep "$restore_after"
      ip link set "pbv${id}h$cut_host" up
      echo "cluster-sim $id: restored host $cut_host's link ${restore_after} s later" >&2
    fi
  ) &
  cutter=$!
fi

set +e
started=$(date +%s.%N)
"${mpi[@]}" "$@"
status=$?
ended=$(date +%s.%N)
set -e
echo "cluster-sim $id: the job exited $status after $(awk "BEGIN { printf \"%.1f\", $ended - $started }") s" >&2
exit "$status"
