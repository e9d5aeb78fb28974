#!/usr/bin/env bash
# The seed benchmark on AWS: provisions one c6id.2xlarge with terraform
# (main.tf next to this script), copies this checkout to it, runs the
# OMB-shaped workloads with `loadtest` (32 partitions, 8+8 clients, 1 KiB,
# acks=1; broker and load generator on separate physical cores, two each,
# data on the NVMe instance store), fetches the results and destroys
# everything it created, also when a step fails or the run is interrupted.
#
# Usage: benchmarks/aws-ec2/run.sh [--yes] [--region R] [WORKLOAD...]
#   WORKLOAD   names under loadtest/workloads/ (default: seed-100k seed-200k seed-max)
#   --yes      really create the resources; without it the script prints
#              what it would create, how long it would take and what it
#              would cost, and creates nothing
#   --region R AWS region (default: $AWS_REGION, else us-east-1)
#
# Environment:
#   PRICE_PER_HOUR  on-demand USD per hour of the instance (default: 0.4032,
#                   c6id.2xlarge Linux in us-east-1; check your region's)
#   INSTANCE_TYPE   (default: c6id.2xlarge)
#   RESULTS_DIR     where results land (default: benchmarks/results/<date>-aws-<type>)
# Needs with --yes: terraform >= 1.5, AWS credentials, ssh, curl, git.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

yes=false
region=${AWS_REGION:-us-east-1}
workloads=()
while [ $# -gt 0 ]; do
    case "$1" in
        --yes) yes=true ;;
        --region) region=${2:?--region needs a value}; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
        *) workloads+=("$1") ;;
    esac
    shift
done
[ ${#workloads[@]} -gt 0 ] || workloads=(seed-100k seed-200k seed-max)
instance_type=${INSTANCE_TYPE:-c6id.2xlarge}
price=${PRICE_PER_HOUR:-0.4032}

# --- the estimate, from the workload files -----------------------------------
seconds() { # 90s, 5m, 1h, or a plain number of seconds
    local v=$1
    case "$v" in
        *ms) echo 0 ;;
        *s) echo "${v%s}" ;;
        *m) echo $(( ${v%m} * 60 )) ;;
        *h) echo $(( ${v%h} * 3600 )) ;;
        *) echo "$v" ;;
    esac
}
field() { # field FILE KEY -> value of "KEY: value", comments dropped
    sed -n "s/^$2:[[:space:]]*\\([^#[:space:]]*\\).*/\\1/p" "$1" | head -n1
}
provision_s=240      # terraform apply and the host booting
build_s=900          # setup.sh and the release build of the broker and loadtest on 8 vCPUs
per_workload_s=60    # a fresh broker per workload, starting and stopping
teardown_s=180       # terraform destroy
run_s=0
for w in "${workloads[@]}"; do
    f="$root/loadtest/workloads/$w.yaml"
    [ -f "$f" ] || { echo "no workload $w (loadtest/workloads/$w.yaml)" >&2; exit 2; }
    for key in warmup duration drain_timeout; do
        v=$(field "$f" "$key")
        [ -n "$v" ] || { echo "$f has no $key" >&2; exit 2; }
        run_s=$(( run_s + $(seconds "$v") ))
    done
    run_s=$(( run_s + per_workload_s ))
done
total_s=$(( provision_s + build_s + run_s + teardown_s ))
cost=$(awk -v s="$total_s" -v p="$price" 'BEGIN { printf "%.2f", s / 3600 * p }')

cat <<PLAN
Plan (terraform in benchmarks/aws-ec2/, region $region):
  create   1 VPC, 1 public subnet, internet gateway and route table
  create   1 security group: SSH from this machine's address only
  create   1 key pair (a throwaway key made for this run)
  create   1 $instance_type (Ubuntu 24.04, 40 GB gp3 root, NVMe instance store for data)
  run      scripts/bench/side-by-side.sh ${workloads[*]}
           (BROKERS=aerostream; broker and loadtest on separate physical cores, two each)
  fetch    the results into ${RESULTS_DIR:-benchmarks/results/<date>-aws-$instance_type}
  destroy  everything above
Time:  about $(( (total_s + 59) / 60 )) min (workloads $(( run_s / 60 )) min at most, build $(( build_s / 60 )) min, provisioning and teardown $(( (provision_s + teardown_s) / 60 )) min)
Cost:  about \$$cost at \$$price per instance-hour on demand (PRICE_PER_HOUR), plus cents for the volume, address and traffic
PLAN

if ! $yes; then
    echo "Nothing was created. Run again with --yes to do it."
    exit 0
fi

# --- the run ------------------------------------------------------------------
for tool in terraform ssh scp curl git; do
    command -v "$tool" >/dev/null || { echo "$tool is needed with --yes" >&2; exit 2; }
done
run_id="$(date -u +%Y%m%d%H%M%S)-$$"
work=$(mktemp -d "${TMPDIR:-/tmp}/aerostream-aws-bench.XXXXXX")
results=${RESULTS_DIR:-$root/benchmarks/results/$(date -u +%Y-%m-%d)-aws-$instance_type}
cp "$here/main.tf" "$work/"
ssh-keygen -q -t ed25519 -N '' -f "$work/key" -C "aerostream-bench-$run_id"
my_ip=$(curl -fsS https://checkip.amazonaws.com | tr -d '[:space:]')
tfvars=(-var "region=$region" -var "instance_type=$instance_type" -var "runner_cidr=$my_ip/32"
        -var "ssh_public_key=$(cat "$work/key.pub")" -var "run_id=$run_id")

destroy() {
    echo "destroying the benchmark's resources"
    terraform -chdir="$work" destroy -auto-approve -input=false "${tfvars[@]}" || {
        echo "terraform destroy failed: the state is in $work; destroy by hand" >&2
        return 1
    }
    rm -rf "$work"
}
trap destroy EXIT

terraform -chdir="$work" init -input=false >/dev/null
terraform -chdir="$work" apply -auto-approve -input=false "${tfvars[@]}"
host=$(terraform -chdir="$work" output -raw host)
sshopts=(-i "$work/key" -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile="$work/known_hosts" -o ConnectTimeout=10)
echo "waiting for SSH on $host"
for _ in $(seq 60); do
    ssh "${sshopts[@]}" "ubuntu@$host" true 2>/dev/null && break
    sleep 5
done

echo "copying this checkout ($(git -C "$root" rev-parse --short HEAD))"
git -C "$root" archive --format=tar HEAD | ssh "${sshopts[@]}" "ubuntu@$host" \
    'mkdir -p aerostream && tar -x -C aerostream'

ssh "${sshopts[@]}" "ubuntu@$host" bash -s -- "${workloads[@]}" <<'REMOTE'
set -euo pipefail
# the NVMe instance store holds the brokers' data
dev=$(for m in /sys/block/nvme*/device/model; do
        grep -qs 'Amazon EC2 NVMe Instance Storage' "$m" && basename "$(dirname "$(dirname "$m")")"
      done | head -n1)
sudo mkfs.xfs -q -f "/dev/$dev"
sudo mkdir -p /mnt/nvme && sudo mount -o noatime "/dev/$dev" /mnt/nvme
sudo install -d -o "$USER" /mnt/nvme/tmp
cd aerostream
# as run.sh does: the build packages (apt, through sudo) and Rust under ~/.cargo
scripts/setup.sh --build-only
export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TARGET_DIR=/mnt/nvme/target
# Separate physical cores: the broker gets the first half of the cores with
# both their hardware threads, the load generator the other half. Shards pin
# themselves to CPUs 0..shards-1, so there is one shard per broker core, on
# each core's first thread (on EC2, CPUs 0-3 are cores 0-3 and 4-7 their siblings).
read -r broker_cpus loadgen_cpus shards < <(python3 - <<'PY'
import glob
cores = sorted({tuple(sorted(int(c) for c in open(p).read().replace("-", ",").split(",")))
                for p in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list")})
half = len(cores) // 2
broker, loadgen = cores[:half], cores[half:]
firsts = sorted(c[0] for c in broker)
assert firsts == list(range(len(broker))), f"cores' first threads are not 0..{len(broker)-1}: {cores}"
print(",".join(str(c) for core in broker for c in core), ",".join(str(c) for core in loadgen for c in core), len(broker))
PY
)
echo "broker on CPUs $broker_cpus ($shards shards), loadtest on CPUs $loadgen_cpus"
lscpu > "$HOME/lscpu.txt"
TMPDIR=/mnt/nvme/tmp BROKERS=aerostream BROKER_CPUS="$broker_cpus" LOADGEN_CPUS="$loadgen_cpus" SHARDS="$shards" \
    RESULTS_DIR="$HOME/results" scripts/bench/side-by-side.sh "$@"
cp "$HOME/lscpu.txt" "$HOME/results/"
REMOTE

mkdir -p "$results"
ssh "${sshopts[@]}" "ubuntu@$host" 'tar -c -C results .' | tar -x -C "$results"
echo "results in $results"
