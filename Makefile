# nri-qos — one-shot NRI QoS hook.  `make` builds build/nri-qos; `make check` runs every test.
#
# Layout (docs/architecture.md, src/README.md): one folder per stage under src/ (os, model,
# records, policy, facts, event, nri, cli; includes only go down that stack, tests/layering.sh),
# tests/unit/<folder>/*.cpp the Catch2 tests, tests/*.sh the
# shell-level suites run by tests/run.sh.

VERSION   ?= $(shell cat VERSION 2>/dev/null || echo 0.0.0)
comma     := ,
# Cross build for aarch64 (issue #33 §1; docs/aarch64.md): `make ARCH=aarch64 [target...]` builds
# into build/aarch64/ with Debian's g++-aarch64-linux-gnu (scripts/deps.sh cross) against bookworm's
# arm64 libraries, unpacked into a private root by scripts/cross-root.sh (the system's apt sources
# and dpkg architectures are not touched). The build-time generators run on the build machine:
# seccomp-bpf-gen natively (it compiles the filter for the target's syscall numbers),
# policy-builtin-gen (target code) under qemu-user. Empty ARCH = the build machine's.
ARCH      ?=
ifneq ($(filter-out $(shell uname -m),$(ARCH)),)
ifneq ($(ARCH),aarch64)
$(error ARCH=$(ARCH): only aarch64 can be cross-built (or the build machine's own, $(shell uname -m)))
endif
CROSS       := aarch64-linux-gnu
CROSS_CXX   ?= $(CROSS)-g++
override CXX := $(CROSS_CXX)
CROSS_CACHE ?= /var/cache/nri-qos-cross-arm64
CROSS_ROOT  ?= $(CROSS_CACHE)/bookworm-root
CROSS_LIB   := $(CROSS_ROOT)/usr/lib/$(CROSS) $(CROSS_ROOT)/lib/$(CROSS)
CPPFLAGS    += -isystem $(CROSS_ROOT)/usr/include -isystem $(CROSS_ROOT)/usr/include/$(CROSS)
CROSS_LDFLAGS := $(addprefix -L,$(CROSS_LIB)) $(addprefix -Wl$(comma)-rpath-link$(comma),$(CROSS_LIB))
# the unit tests and the generators are linked statically: they run under qemu-user, which then
# needs no arm64 loader nor shared libraries
TARGET_TOOL_LDFLAGS := -static
PKG_CONFIG  := PKG_CONFIG_LIBDIR=$(CROSS_ROOT)/usr/lib/$(CROSS)/pkgconfig:$(CROSS_ROOT)/usr/share/pkgconfig \
               PKG_CONFIG_SYSROOT_DIR=$(CROSS_ROOT) pkg-config
RUN_TARGET  ?= qemu-aarch64-static
SECCOMP_ARCH := aarch64
BUILD     ?= build/aarch64
endif
HOSTCXX   ?= g++
PKG_CONFIG ?= pkg-config
BUILD     ?= build
CXX       ?= g++
PROTOC    ?= protoc
PREFIX    ?= /usr
DESTDIR   ?=

WARN      := -Wall -Wextra -Wpedantic -Wshadow -Wno-missing-field-initializers
OPT       ?= -O2
# Default metrics textfile (--metrics-file, settings.metrics_file): node_exporter's documented
# directory; the Debian package sets Debian's prometheus-node-exporter directory instead.
METRICS_FILE ?= /var/lib/node_exporter/textfile_collector/nri_qos.prom
CPPFLAGS  += -Isrc -I$(BUILD)/gen -DNRI_QOS_VERSION='"$(VERSION)"' -D_GNU_SOURCE \
             -DNRI_QOS_METRICS_FILE='"$(METRICS_FILE)"'
CXXFLAGS  ?= $(OPT) -g0
CXXFLAGS  += -std=c++17 $(WARN) -fno-plt -ffunction-sections -fdata-sections
# Fully static: the hook is exec'd on every container start and must not depend on the
# node's libstdc++/glibc versions (nor pay the dynamic loader's ~1 ms).
LDFLAGS   += $(CROSS_LDFLAGS) -static -Wl,--gc-sections -Wl,-O1
# Exceptions on bad input at the cost of a hit (issue #22): gcc's -static links crtbeginT.o, which
# registers .eh_frame with libgcc's unwinder; the first throw then sorts every FDE of the binary
# (about 25 M instructions, ~8 ms: a malformed request cost 40 hits). src/static-eh.specs links
# crtbegin.o instead (no registration) and --eh-frame-hdr gives the unwinder the linker's sorted
# PT_GNU_EH_FRAME table, found through dl_iterate_phdr as in dynamic and static-pie binaries
# (libgcc unwind-dw2-fde-dip.c). tests/hygiene.sh checks the header is there.
STATIC_EH := -Wl,--eh-frame-hdr -specs=src/static-eh.specs   # the static links only (nri-qos, relay-floor)
# The static std::ios_base::Init objects (<iostream>: CLI11, protobuf-lite, the relay) are
# no-ops in the hook; main.cpp starts the standard streams on every path but plain `invoke`.
# main.cpp's __wrap___cxa_atexit registers no static destructor on a plain `invoke` (it ends with _exit).
IOS_WRAP  := -Wl,--wrap=_ZNSt8ios_base4InitC1Ev -Wl,--wrap=_ZNSt8ios_base4InitD1Ev -Wl,--wrap=__cxa_atexit
LDLIBS    += -lprotobuf-lite -lnettle -lyaml-cpp -pthread

# The folders of the hook's library, bottom of the stack first (src/README.md); src/tools,
# src/cri and src/helper are separate programs.
SRC_DIRS  := os model records policy facts event nri cli
PROTO_SRC := src/nri/nri.proto
PROTO_CC  := $(BUILD)/gen/nri/nri.pb.cc
PROTO_H   := $(BUILD)/gen/nri/nri.pb.h

SRCS      := $(wildcard $(addsuffix /*.cpp,$(addprefix src/,$(SRC_DIRS))))
MAIN_SRC  := src/cli/main.cpp
LIB_SRCS  := $(filter-out $(MAIN_SRC),$(SRCS))
LIB_OBJS  := $(LIB_SRCS:%.cpp=$(BUILD)/obj/%.o) $(if $(wildcard $(PROTO_SRC)),$(BUILD)/obj/gen/nri.pb.o)
MAIN_OBJ  := $(BUILD)/obj/src/cli/main.o

TEST_SRCS := $(wildcard tests/unit/*.cpp tests/unit/*/*.cpp)
TEST_OBJS := $(TEST_SRCS:%.cpp=$(BUILD)/obj/%.o)

.PHONY: cri metrics all deps build-deps demo check test unit e2e bench bench-quick fuzz fuzz-smoke dist rpm deb install clean
all: $(BUILD)/nri-qos $(BUILD)/nri-qos-cri $(BUILD)/nri-qos-systemd $(BUILD)/nri-qos-metrics

deps:
	scripts/deps.sh build test

# Before anything is compiled: name every missing build dependency and the command that installs
# it, instead of stopping at the first with "Error 127" (scripts/check-build-deps.sh).
# HOOK_DEP_ITEMS: what build/nri-qos itself includes and links (all that `make demo` checks and
# scripts/deps.sh demo installs); the companions add sd-bus (nri-qos-systemd), gRPC (nri-qos-cri)
# and cpp-httplib (nri-qos-metrics).
HOOK_DEP_ITEMS := nlohmann/json.hpp:nlohmann-json3-dev CLI/CLI.hpp:libcli11-dev toml.hpp:libtoml11-dev \
                   seccomp.h:libseccomp-dev libseccomp.a:libseccomp-dev \
                   google/protobuf/message_lite.h:libprotobuf-dev libprotobuf-lite.a:libprotobuf-dev \
                   nettle/sha2.h:nettle-dev libnettle.a:nettle-dev \
                   yaml-cpp/yaml.h:libyaml-cpp-dev libyaml-cpp.a:libyaml-cpp-dev
BUILD_DEP_ITEMS ?= $(HOOK_DEP_ITEMS) systemd/sd-bus.h:libsystemd-dev grpcpp/grpcpp.h:libgrpc++-dev \
                   httplib.h:libcpp-httplib-dev
ifdef CROSS
# Cross build: the cross compiler and qemu-user from scripts/deps.sh cross, the arm64 libraries
# fetched into CROSS_ROOT (idempotent: nothing is fetched once they are there).
build-deps:
	@command -v $(CXX) >/dev/null && command -v $(RUN_TARGET) >/dev/null || { \
	  echo "nri-qos: cannot cross-build: no $(CXX) or $(RUN_TARGET) (as root: scripts/deps.sh cross)" >&2; exit 1; }
	@scripts/check-build-deps.sh "$(HOSTCXX)" "$(PROTOC)" seccomp.h:libseccomp-dev
	@scripts/cross-root.sh $(CROSS_ROOT)
else
build-deps:
	@scripts/check-build-deps.sh "$(CXX)" "$(PROTOC)" $(BUILD_DEP_ITEMS)
endif

# one protoc run makes both files (a grouped target: with two plain targets make -j ran protoc
# twice at once, both writing the same files)
$(PROTO_CC) $(PROTO_H) &: $(PROTO_SRC) | build-deps
	@mkdir -p $(BUILD)/gen/nri
	$(PROTOC) --proto_path=src/nri --cpp_out=$(BUILD)/gen/nri $<

# The seccomp program is compiled by libseccomp at build time (src/tools/seccomp-bpf-gen.cpp).
SECCOMP_H := $(BUILD)/gen/seccomp_bpf.h
# It runs on the build machine (HOSTCXX) and compiles for the target's syscall numbers (SECCOMP_ARCH,
# empty = the build machine's).
$(BUILD)/seccomp-bpf-gen: src/tools/seccomp-bpf-gen.cpp src/os/sandbox_syscalls.hpp | build-deps
	@mkdir -p $(dir $@)
	$(HOSTCXX) -std=c++17 -O1 -Isrc $< -lseccomp -o $@
$(SECCOMP_H): $(BUILD)/seccomp-bpf-gen
	@mkdir -p $(dir $@)
	$< $(SECCOMP_ARCH) > $@.tmp && mv $@.tmp $@
$(BUILD)/obj/src/os/sandbox.o: $(SECCOMP_H)

# The built-in policy: conf/nri.d/nri-qos.toml validated (no error, no warning) and compiled at
# build time into the flat compiled form, linked in as a byte array (src/policy/policy_builtin.*).
POLICY_INC  := $(BUILD)/gen/policy_builtin.inc
# The generator links the policy compile alone, not libnriqos.a: libnriqos.a holds
# policy_builtin.o, which includes the generator's own output. So its objects are listed by hand:
# the policy's parser, checks and flat form and what they call (knob and fact tables, cpusets,
# SHA-256). A new dependency of those shows here as an undefined reference: add its object.
POLICY_GEN_OBJS := $(addprefix $(BUILD)/obj/src/,policy/policy.o policy/policy_toml.o policy/policy_text.o policy/policy_knobs.o \
                   policy/policy_check.o policy/policy_cache.o policy/policy_flat.o policy/policy_settings.o model/knobs.o os/sha256.o \
                   model/fact_table.o os/cpuset.o)
$(BUILD)/policy-builtin-gen: src/tools/policy-builtin-gen.cpp $(POLICY_GEN_OBJS)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) $(CROSS_LDFLAGS) $(TARGET_TOOL_LDFLAGS) $< $(POLICY_GEN_OBJS) -lnettle -o $@
$(POLICY_INC): $(BUILD)/policy-builtin-gen conf/nri.d/nri-qos.toml
	@mkdir -p $(dir $@)
	$(RUN_TARGET) $< conf/nri.d/nri-qos.toml > $@.tmp && mv $@.tmp $@ || { rm -f $@.tmp; exit 1; }
$(BUILD)/obj/src/policy/policy_builtin.o: $(POLICY_INC)

$(BUILD)/obj/gen/nri.pb.o: $(PROTO_CC)
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(filter-out $(WARN) -Wpedantic,$(CXXFLAGS)) -w -c $< -o $@

$(BUILD)/obj/tests/%.o: CPPFLAGS += -DNRI_QOS_SRCDIR='"$(CURDIR)"'
$(BUILD)/obj/%.o: %.cpp $(if $(wildcard $(PROTO_SRC)),$(PROTO_H)) | build-deps
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libnriqos.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

# src/hot-text.ld (generated by scripts/hot-text.sh) puts the code of a plain `invoke` first, in a
# few 64 KiB fault-around windows; the link map is what the script reads.
# src/hot-data.ld (scripts/hot-data.py, from a .bss dump of a plain `invoke`: bench/oneshot-profile.sh
# PROFILE_HOTDATA=1) puts the .bss that path writes together, then the deadline record and the arena.
HOT_LD    := $(wildcard src/hot-text.ld)
HOT_DATA_LD := $(wildcard src/hot-data.ld)
$(BUILD)/nri-qos: $(MAIN_OBJ) $(BUILD)/libnriqos.a $(HOT_LD) $(HOT_DATA_LD) src/static-eh.specs
	$(CXX) $(CXXFLAGS) $(LDFLAGS) $(STATIC_EH) $(IOS_WRAP) $(if $(HOT_LD),-Wl$(comma)-T$(comma)$(HOT_LD)) \
		$(if $(HOT_DATA_LD),-Wl$(comma)-T$(comma)$(HOT_DATA_LD)) -Wl,-Map=$@.map \
		$(MAIN_OBJ) $(BUILD)/libnriqos.a $(LDLIBS) -o $@

# The CRI client of `reconcile --discover` (src/cri/): a separate, dynamically linked executable
# with Debian's gRPC (libgrpc++-dev, protobuf-compiler-grpc), so that the static hook carries no
# gRPC. Installed as /usr/libexec/nri-qos/nri-qos-cri; `nri-qos reconcile --discover` execs it.
GRPC_PLUGIN ?= $(shell command -v grpc_cpp_plugin 2>/dev/null || echo /usr/bin/grpc_cpp_plugin)
CRI_GEN   := $(BUILD)/gen/cri
CRI_PB    := $(CRI_GEN)/cri.pb.cc $(CRI_GEN)/cri.grpc.pb.cc
$(CRI_PB) $(CRI_GEN)/cri.pb.h $(CRI_GEN)/cri.grpc.pb.h &: src/cri/cri.proto | build-deps
	@mkdir -p $(CRI_GEN)
	$(PROTOC) --proto_path=src/cri --cpp_out=$(CRI_GEN) --grpc_out=$(CRI_GEN) --plugin=protoc-gen-grpc=$(GRPC_PLUGIN) $<
# Three objects, not one compiler command over the three sources: under make -j they compile
# side by side (the generated CRI sources are the longest compiles of the tree).
CRI_OBJS  := $(BUILD)/obj/cri/nri-qos-cri.o $(BUILD)/obj/cri/cri.pb.o $(BUILD)/obj/cri/cri.grpc.pb.o
CRI_CXX    = $(CXX) $(filter-out -DNRI_QOS_METRICS_FILE=%,$(CPPFLAGS)) -I$(CRI_GEN) $(filter-out -ffunction-sections -fdata-sections,$(CXXFLAGS)) -w \
		$(shell $(PKG_CONFIG) --cflags grpc++ protobuf)
$(BUILD)/obj/cri/nri-qos-cri.o: src/cri/nri-qos-cri.cpp $(CRI_PB)
	@mkdir -p $(dir $@)
	$(CRI_CXX) -c $< -o $@
$(BUILD)/obj/cri/%.o: $(CRI_GEN)/%.cc $(CRI_PB)
	@mkdir -p $(dir $@)
	$(CRI_CXX) -c $< -o $@
$(BUILD)/nri-qos-cri: $(CRI_OBJS)
	$(CXX) $(filter-out -ffunction-sections -fdata-sections,$(CXXFLAGS)) \
		$(filter-out -static,$(LDFLAGS)) -Wl,--as-needed $(CRI_OBJS) $(shell $(PKG_CONFIG) --libs grpc++ protobuf) -o $@
cri: $(BUILD)/nri-qos-cri
# The companion that sets systemd unit properties (src/helper/nri-qos-systemd.cpp,
# src/event/systemd_unit.hpp): dynamically linked with Debian's libsystemd (sd-bus), which has no static
# library. Installed in /usr/libexec/nri-qos/; the hook runs it only on the systemd cgroup driver.
LIBEXECDIR ?= $(PREFIX)/libexec/nri-qos
$(BUILD)/nri-qos-systemd: src/helper/nri-qos-systemd.cpp | build-deps
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) $(filter-out -static,$(LDFLAGS)) $< $$($(PKG_CONFIG) --cflags --libs libsystemd) -o $@

# The native-mode benchmark's process-per-event floor (bench/relay-floor.cpp, bench/native.sh):
# build/nri-qos with an evaluator that answers without evaluating. Never installed.
$(BUILD)/bench/nri-qos-relay-floor: bench/relay-floor.cpp $(MAIN_OBJ) $(BUILD)/libnriqos.a
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) $(LDFLAGS) $(STATIC_EH) $(IOS_WRAP) $< $(MAIN_OBJ) $(BUILD)/libnriqos.a $(LDLIBS) -o $@

# tests/sandbox-probe.cpp: loads the hook's sandbox and makes forbidden calls; tests/aarch64.sh runs
# it on an arm64 kernel (qemu-system-aarch64). Static, like the hook. Never installed.
$(BUILD)/sandbox-probe: tests/sandbox-probe.cpp $(BUILD)/libnriqos.a
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) $(LDFLAGS) $< $(BUILD)/libnriqos.a $(LDLIBS) -o $@

# Unit tests link the same library (dynamically linked, faster to build).
$(BUILD)/unit-tests: $(TEST_OBJS) $(BUILD)/libnriqos.a
	$(CXX) $(CXXFLAGS) $(CROSS_LDFLAGS) $(TARGET_TOOL_LDFLAGS) $^ $(LDLIBS) -o $@

unit: $(BUILD)/unit-tests $(BUILD)/nri-qos
	NRI_QOS_BIN=$(abspath $(BUILD)/nri-qos) $(BUILD)/unit-tests

# `make demo`: run the hook on a bundled real containerd request with the bundled policy.
# `make demo` needs only the hook itself: the packages that build nri-qos (HOOK_DEP_ITEMS: not
# the companions' gRPC, sd-bus, cpp-httplib) and jq, and one binary built on every CPU (issue #33
# §5). scripts/demo-cold.sh times it on a fresh bookworm root (README, "Try it").
demo:
	scripts/deps.sh demo
	$(MAKE) -j$(shell nproc) BUILD_DEP_ITEMS="$(HOOK_DEP_ITEMS)" $(BUILD)/nri-qos
	scripts/demo.sh

# `make check`: install missing apt dependencies, build, run every suite (unit, binary-level,
# real cgroup v1/v2, fuzz smoke, e2e when the machine allows it). Prints "N passed, N failed".
# It also builds the native benchmark's floor (bench/relay-floor.cpp), so that it keeps linking.
# make check compiles through ccache (scripts/deps.sh test installs it; /usr/lib/ccache first in
# PATH, so g++ and clang++ are its wrappers there): the packaging suite's rpm build (rpmbuild's
# %make_build runs this Makefile with the same flags, OPT -O2 -g0, in build/rpm/BUILD) then takes
# the objects of this build from the cache instead of compiling the tree a second time — ccache
# hashes no working directory for -g0 (its hash_dir is about debug info), and the include paths
# are relative. It does hash LANG, which rpmbuild sets to C (%___build_pre): the build below runs
# with LANG=C too (checked: src/nri/service.cpp from build/rpm/BUILD hits the cache with the LANG
# of the build that filled it, misses with another). The deb build's flags (dpkg-buildflags)
# differ: it compiles.
check:
	scripts/deps.sh build test
	p=$$PATH; [ -x /usr/lib/ccache/g++ ] && p=/usr/lib/ccache:$$p; \
	LANG=C PATH=$$p $(MAKE) -j$(shell nproc) all $(BUILD)/unit-tests $(BUILD)/bench/nri-qos-relay-floor && \
	PATH=$$p tests/run.sh

test: check

e2e: all
	tests/e2e/run.sh

# `make bench`: every benchmark (bench/bench.sh; rewrites the results block of BENCHMARKS.md).
# `make bench-quick`: the same with short runs (BENCH_QUICK=1). The Synchronize and full-node
# parts (bench/sync.sh, bench/fullnode.sh) drive the relay with build/unit-tests' [.nri-sync].
bench: all $(BUILD)/unit-tests
	scripts/deps.sh bench
	bench/bench.sh

bench-quick: all $(BUILD)/unit-tests
	scripts/deps.sh bench
	BENCH_QUICK=1 bench/bench.sh

fuzz:
	scripts/deps.sh fuzz
	tests/fuzz/run.sh long

fuzz-smoke:
	scripts/deps.sh fuzz
	tests/fuzz/run.sh smoke

# The metrics server of `relay --metrics-listen` and `serve-metrics` (src/metrics/, issue #33 §2):
# dynamically linked with Debian's cpp-httplib (libcpp-httplib-dev has no static library), with
# the library's own flags from pkg-config (its SSL/zlib/brotli options change its classes).
# Installed in /usr/libexec/nri-qos/; the relay service execs it as a process of its own.
$(BUILD)/nri-qos-metrics: src/metrics/nri-qos-metrics.cpp src/nri/service_status.cpp src/nri/service.hpp | build-deps
	@mkdir -p $(dir $@)
	$(CXX) $(filter-out -DNRI_QOS_METRICS_FILE=%,$(CPPFLAGS)) $(filter-out -ffunction-sections -fdata-sections,$(CXXFLAGS)) \
		$$($(PKG_CONFIG) --cflags cpp-httplib) $(filter-out -static,$(LDFLAGS)) -Wl,--as-needed \
		src/metrics/nri-qos-metrics.cpp src/nri/service_status.cpp $$($(PKG_CONFIG) --libs cpp-httplib) -pthread -o $@
metrics: $(BUILD)/nri-qos-metrics
dist:
	scripts/dist.sh $(VERSION)

rpm: dist
	packaging/rpm/build.sh $(VERSION)

deb:
	packaging/deb/build.sh $(VERSION)

install: all
	install -D -m 0755 $(BUILD)/nri-qos $(DESTDIR)/opt/nri/bin/nri-qos
	install -D -m 0755 $(BUILD)/nri-qos-cri $(DESTDIR)$(LIBEXECDIR)/nri-qos-cri
	install -D -m 0755 $(BUILD)/nri-qos-systemd $(DESTDIR)$(LIBEXECDIR)/nri-qos-systemd
	install -D -m 0755 $(BUILD)/nri-qos-metrics $(DESTDIR)$(LIBEXECDIR)/nri-qos-metrics
	install -D -m 0644 conf/nri.d/nri-qos.toml $(DESTDIR)/etc/nri/nri-qos.toml
	install -D -m 0644 man/nri-qos.8 $(DESTDIR)$(PREFIX)/share/man/man8/nri-qos.8
	install -D -m 0644 man/nri-qos.toml.5 $(DESTDIR)$(PREFIX)/share/man/man5/nri-qos.toml.5
	install -D -m 0644 packaging/logrotate/nri-qos $(DESTDIR)/etc/logrotate.d/nri-qos

clean:
	rm -rf $(BUILD) dist

-include $(LIB_OBJS:.o=.d) $(MAIN_OBJ:.o=.d) $(TEST_OBJS:.o=.d)
