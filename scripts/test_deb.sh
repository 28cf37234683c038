#!/usr/bin/env bash
# The installable package (issue 16, item 8), checked as a user would: build the .deb files with
# CPack from a finished build, unpack the planner's package into an empty root (dpkg -x: no root
# rights, no change to this machine), and from a directory outside the source tree run the quick
# start's plan, --version and the man page. Run by ctest (test "package_deb") or by hand:
#   bash scripts/test_deb.sh build
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cpack --config "$BUILD/CPackConfig.cmake" -G DEB -B "$work/pkg" >cpack.log 2>&1 || { cat cpack.log; exit 1; }
deb=$(ls pkg/zeroplan_*.deb | head -n 1)
[ -f "$deb" ] || { echo "no zeroplan_*.deb built"; ls pkg; exit 1; }
echo "package: $(basename "$deb") ($(stat -c %s "$deb") bytes)"
dpkg-deb --info "$deb" | grep -E 'Package|Version|Depends' || true
mkdir root
dpkg-deb -x "$deb" root
ls -l root/usr/bin/zeroplan
[ -f root/usr/share/man/man1/zeroplan.1.gz ] || [ -f root/usr/share/man/man1/zeroplan.1 ] || { echo "no man page"; exit 1; }
# The planner's package carries no executor and no GPU or MPI dependency.
if ldd root/usr/bin/zeroplan | grep -Ei 'cuda|cublas|nccl|libmpi'; then echo "planner links GPU/MPI libraries"; exit 1; fi
mkdir elsewhere && cd elsewhere
../root/usr/bin/zeroplan --version | tee version.txt
grep -q 'commit' version.txt
../root/usr/bin/zeroplan --model 13b --gpus 4xA40 >plan.txt
grep -q '^Recommended: ' plan.txt || { cat plan.txt; echo "no recommendation"; exit 1; }
head -n 1 plan.txt
echo "package_deb: ok"
