#!/usr/bin/env bash
# Installs the built persim so that it runs from any directory: PREFIX/bin/persim and its
# home PREFIX/share/persim (suites, VM configurations, the tracing plugin, the static guest
# tools; docs/design/architecture.md, "Where Persim's files are"), and PREFIX/include/persim.h for
# programs that talk to the tracer. Run after building
# (scripts/setup.sh does both). Default PREFIX: /usr/local.
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=${1:-/usr/local}
case $prefix in
    -h | --help)
        echo "usage: $0 [PREFIX]   (default /usr/local)"
        exit 0
        ;;
esac
home=$prefix/share/persim
guest=target/x86_64-unknown-linux-gnu/release
tools=()
for tool in hypercall fs-dump fs-ops fw-cfg stay-busy user-maps ringbuf-tool; do
    tools+=("$guest/$tool")
done
for built in target/release/persim target/release/libpersim_plugin.so "${tools[@]}"; do
    [[ -f $built ]] || { echo "install.sh: $built is missing: build first (scripts/setup.sh)" >&2; exit 2; }
done

install -d "$prefix/bin" "$prefix/include" "$home/lib" "$home/guest"
install -m 644 include/persim.h "$prefix/include/persim.h"
install -m 755 target/release/persim "$prefix/bin/persim"
install -m 644 target/release/libpersim_plugin.so "$home/lib/"
install -m 755 "${tools[@]}" "$home/guest/"
# PmemConjurer's analyzer plugin for `persim conjure` (conjurer/build.sh; setup builds it)
if [[ -f target/conjurer/pmem-conjurer.so ]]; then
    install -m 644 target/conjurer/pmem-conjurer.so "$home/lib/"
fi
# A fresh copy of the data: a suite or configuration removed from the tree goes too.
rm -rf "$home/suites" "$home/vm"
cp -r suites vm "$home/"
echo "install.sh: persim installed in $prefix/bin, its files in $home"
