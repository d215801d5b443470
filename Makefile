# nri-qos — one-shot NRI QoS hook.  `make` builds build/nri-qos; `make check` runs every test.
#
# Layout: src/*.cpp is the pipeline (request → model → classify → adjustment → sinks),
# src/nri/ the native NRI (ttrpc) relay, tests/unit/*.cpp the Catch2 tests, tests/*.sh the
# shell-level suites run by tests/run.sh.

VERSION   ?= $(shell cat VERSION 2>/dev/null || echo 0.0.0)
BUILD     ?= build
CXX       ?= g++
PROTOC    ?= protoc
PREFIX    ?= /usr
DESTDIR   ?=

WARN      := -Wall -Wextra -Wpedantic -Wshadow -Wno-missing-field-initializers
OPT       ?= -O2
CPPFLAGS  += -Isrc -I$(BUILD)/gen -DNRI_QOS_VERSION='"$(VERSION)"' -D_GNU_SOURCE
CXXFLAGS  ?= $(OPT) -g0
CXXFLAGS  += -std=c++17 $(WARN) -fno-plt -ffunction-sections -fdata-sections
# Fully static: the hook is exec'd on every container start and must not depend on the
# node's libstdc++/glibc versions (nor pay the dynamic loader's ~1 ms).
LDFLAGS   += -static -Wl,--gc-sections -Wl,-O1
# The static std::ios_base::Init objects (<iostream>: CLI11, protobuf-lite, the relay) are
# no-ops in the hook; main.cpp starts the standard streams on every path but plain `invoke`.
IOS_WRAP  := -Wl,--wrap=_ZNSt8ios_base4InitC1Ev -Wl,--wrap=_ZNSt8ios_base4InitD1Ev
LDLIBS    += -lprotobuf-lite -lnettle -pthread

PROTO_SRC := src/nri/nri.proto
PROTO_CC  := $(BUILD)/gen/nri/nri.pb.cc
PROTO_H   := $(BUILD)/gen/nri/nri.pb.h

SRCS      := $(wildcard src/*.cpp src/nri/*.cpp)
MAIN_SRC  := src/main.cpp
LIB_SRCS  := $(filter-out $(MAIN_SRC),$(SRCS))
LIB_OBJS  := $(LIB_SRCS:%.cpp=$(BUILD)/obj/%.o) $(if $(wildcard $(PROTO_SRC)),$(BUILD)/obj/gen/nri.pb.o)
MAIN_OBJ  := $(BUILD)/obj/src/main.o

TEST_SRCS := $(wildcard tests/unit/*.cpp)
TEST_OBJS := $(TEST_SRCS:%.cpp=$(BUILD)/obj/%.o)

.PHONY: all deps build-deps demo check test unit e2e bench bench-quick fuzz fuzz-smoke dist rpm deb install clean
all: $(BUILD)/nri-qos

deps:
	scripts/deps.sh build test

# Before anything is compiled: name every missing build dependency and the command that installs
# it, instead of stopping at the first with "Error 127" (scripts/check-build-deps.sh).
BUILD_DEP_ITEMS ?= nlohmann/json.hpp:nlohmann-json3-dev CLI/CLI.hpp:libcli11-dev toml.hpp:libtoml11-dev \
                   seccomp.h:libseccomp-dev libseccomp.a:libseccomp-dev \
                   google/protobuf/message_lite.h:libprotobuf-dev libprotobuf-lite.a:libprotobuf-dev \
                   nettle/sha2.h:nettle-dev libnettle.a:nettle-dev
build-deps:
	@scripts/check-build-deps.sh "$(CXX)" "$(PROTOC)" $(BUILD_DEP_ITEMS)

$(PROTO_CC) $(PROTO_H): $(PROTO_SRC) | build-deps
	@mkdir -p $(BUILD)/gen/nri
	$(PROTOC) --proto_path=src/nri --cpp_out=$(BUILD)/gen/nri $<

# The seccomp program is compiled by libseccomp at build time (src/tools/seccomp-bpf-gen.cpp).
SECCOMP_H := $(BUILD)/gen/seccomp_bpf.h
$(BUILD)/seccomp-bpf-gen: src/tools/seccomp-bpf-gen.cpp src/sandbox_syscalls.hpp | build-deps
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O1 -Isrc $< -lseccomp -o $@
$(SECCOMP_H): $(BUILD)/seccomp-bpf-gen
	@mkdir -p $(dir $@)
	$< > $@.tmp && mv $@.tmp $@
$(BUILD)/obj/src/sandbox.o: $(SECCOMP_H)

# The built-in policy: conf/nri.d/nri-qos.toml validated (no error, no warning) and compiled at
# build time into the flat compiled form, linked in as a byte array (src/policy_builtin.*).
POLICY_INC  := $(BUILD)/gen/policy_builtin.inc
POLICY_GEN_OBJS := $(addprefix $(BUILD)/obj/src/,policy.o policy_cache.o knobs.o sha256.o)
$(BUILD)/policy-builtin-gen: src/tools/policy-builtin-gen.cpp $(POLICY_GEN_OBJS)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) $< $(POLICY_GEN_OBJS) -lnettle -o $@
$(POLICY_INC): $(BUILD)/policy-builtin-gen conf/nri.d/nri-qos.toml
	@mkdir -p $(dir $@)
	$< conf/nri.d/nri-qos.toml > $@.tmp && mv $@.tmp $@ || { rm -f $@.tmp; exit 1; }
$(BUILD)/obj/src/policy_builtin.o: $(POLICY_INC)

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

$(BUILD)/nri-qos: $(MAIN_OBJ) $(BUILD)/libnriqos.a
	$(CXX) $(CXXFLAGS) $(LDFLAGS) $(IOS_WRAP) $^ $(LDLIBS) -o $@

# Unit tests link the same library (dynamically linked, faster to build).
$(BUILD)/unit-tests: $(TEST_OBJS) $(BUILD)/libnriqos.a
	$(CXX) $(CXXFLAGS) $^ $(LDLIBS) -o $@

unit: $(BUILD)/unit-tests $(BUILD)/nri-qos
	NRI_QOS_BIN=$(abspath $(BUILD)/nri-qos) $(BUILD)/unit-tests

# `make demo`: run the hook on a bundled real containerd request with the bundled policy.
demo:
	scripts/deps.sh build test
	$(MAKE) all
	scripts/demo.sh

# `make check`: install missing apt dependencies, build, run every suite (unit, binary-level,
# real cgroup v1/v2, fuzz smoke, e2e when the machine allows it). Prints "N passed, N failed".
check:
	scripts/deps.sh build test
	$(MAKE) -j$(shell nproc) all $(BUILD)/unit-tests
	tests/run.sh

test: check

e2e: all
	tests/e2e/run.sh

# `make bench`: one-shot, native and pod-start benchmarks (bench/bench.sh; rewrites the results
# block of BENCHMARKS.md). `make bench-quick`: the same with short runs (BENCH_QUICK=1).
bench: all
	scripts/deps.sh bench
	bench/bench.sh

bench-quick: all
	scripts/deps.sh bench
	BENCH_QUICK=1 bench/bench.sh

fuzz:
	scripts/deps.sh fuzz
	tests/fuzz/run.sh long

fuzz-smoke:
	scripts/deps.sh fuzz
	tests/fuzz/run.sh smoke

dist:
	scripts/dist.sh $(VERSION)

rpm: dist
	packaging/rpm/build.sh $(VERSION)

deb:
	packaging/deb/build.sh $(VERSION)

install: all
	install -D -m 0755 $(BUILD)/nri-qos $(DESTDIR)/opt/nri/bin/nri-qos
	install -D -m 0644 conf/nri.d/nri-qos.toml $(DESTDIR)/etc/nri/nri-qos.toml
	install -D -m 0644 man/nri-qos.8 $(DESTDIR)$(PREFIX)/share/man/man8/nri-qos.8
	install -D -m 0644 man/nri-qos.toml.5 $(DESTDIR)$(PREFIX)/share/man/man5/nri-qos.toml.5
	install -D -m 0644 packaging/logrotate/nri-qos $(DESTDIR)/etc/logrotate.d/nri-qos

clean:
	rm -rf $(BUILD) dist

-include $(LIB_OBJS:.o=.d) $(MAIN_OBJ:.o=.d) $(TEST_OBJS:.o=.d)
