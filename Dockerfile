# Multi-stage build of the C sample-controller: `docker build .` where a registry is
# reachable, or `make image` (hack/image.sh: buildah, with a debian:bookworm base made
# locally by mmdebstrap) where none is. Standard Dockerfile syntax only.
#
# The runtime image is FROM scratch and holds only what the daemon loads: the binary
# (every library but glibc linked in statically: hack/static-deps.sh), glibc's shared
# libraries ldd lists for it (at the paths ldd names) and the dynamic loader, the CA
# bundle, nsswitch.conf (glibc's resolver reads it; files and dns are
# built into glibc 2.36's libc.so.6, no libnss_*.so is loaded), passwd/group with
# the nonroot user 65532 it runs as, and C.UTF-8's LC_CTYPE (schema patterns are
# matched in it, by UTF-8 character as the API server matches them). /etc/hosts and
# /etc/resolv.conf come from the container runtime; the service-account token and CA
# from the pod's volume.

FROM debian:bookworm AS build
# (libgnutls28-dev for libmicrohttpd-dev's headers and the static nettle, hogweed, gmp
# and tasn1 archives it brings; the GnuTLS linked in is hack/static-deps.sh's.)
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential pkg-config autoconf automake libtool zlib1g-dev libyajl-dev \
      libyaml-dev libev-dev libmicrohttpd-dev libgnutls28-dev ca-certificates \
    && rm -rf /var/lib/apt/lists/*
# libcurl, nghttp2, OpenSSL and GnuTLS trimmed to what the daemon uses and built
# static from Debian's source packages (hack/static-deps.sh says what is left out
# and why): the image's process maps no shared library but glibc's. A layer of its
# own, rebuilt only when the script changes.
COPY hack/static-deps.sh /tmp/static-deps.sh
RUN bash /tmp/static-deps.sh /opt/static && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Only what bin/sample-controller is made from, library first (headers in include/): a change under cmd/
# rebuilds only cmd/, and changes to tests/, deploy/ or hack/ (but static-deps.sh)
# rebuild nothing.
# (`make bin/sample-controller` does not run `deps`: nothing else is installed.)
COPY Makefile VERSION ./
COPY include include
COPY api api
COPY pkg pkg
RUN make -j"$(nproc)" STATIC_DEPS=/opt/static lib/libckube.a
COPY cmd cmd
# Only glibc may stay shared (the line ldd prints for anything else fails the build).
RUN make -j"$(nproc)" STATIC_DEPS=/opt/static bin/sample-controller && \
    ! ldd bin/sample-controller | grep -Ev 'linux-vdso|/libc\.so|/libm\.so|ld-linux'
# The Makefile hardens release builds (stack protector, _FORTIFY_SOURCE, full RELRO):
# refuse an image whose binary lost any of it.
RUN readelf -lW bin/sample-controller | grep -q GNU_RELRO && \
    readelf -dW bin/sample-controller | grep -Eq 'BIND_NOW|FLAGS_1.*NOW' && \
    nm -D bin/sample-controller | grep -q ' U __stack_chk_fail' && \
    nm -D bin/sample-controller | grep -Eq ' U __[a-z0-9_]+_chk(@|$)'

# The staging tree of the runtime image.
RUN set -eu; \
    s=/staging; \
    mkdir -p $s/usr/local/bin $s/etc/ssl/certs; \
    strip --strip-unneeded -o $s/usr/local/bin/sample-controller bin/sample-controller; \
    for lib in $(ldd bin/sample-controller | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do \
      cp --parents -L "$lib" $s/; \
    done; \
    cp /etc/ssl/certs/ca-certificates.crt $s/etc/ssl/certs/; \
    cp --parents /usr/lib/locale/C.utf8/LC_CTYPE $s/; \
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >$s/etc/passwd; \
    printf 'root:x:0:\nnonroot:x:65532:\n' >$s/etc/group; \
    printf 'passwd: files\ngroup: files\nhosts: files dns\n' >$s/etc/nsswitch.conf; \
    mkdir -p $s/tmp $s/home/nonroot; \
    chmod 1777 $s/tmp; \
    chown 65532:65532 $s/home/nonroot; \
    ldd $s/usr/local/bin/sample-controller >/dev/null; \
    find $s -type f | sort

FROM scratch
ARG VERSION=0.1.0
# This project has no published repository yet: hack/image.sh passes the checkout's
# https remote when it has one, and the commit built.
ARG SOURCE=unpublished
ARG REVISION=unknown
LABEL org.opencontainers.image.title="sample-controller-c" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.description="Kubernetes' sample-controller in C11 (Foo custom resources reconciled into Deployments)"
COPY --from=build /staging/ /
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/sample-controller"]
