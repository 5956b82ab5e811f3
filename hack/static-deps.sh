#!/usr/bin/env bash
# hack/static-deps.sh PREFIX — the release image's TLS and HTTP libraries, built
# trimmed and static from Debian's own source packages (their patches applied) and
# installed under PREFIX (include/, lib/*.a). Run inside the Dockerfile's build stage
# (as root, on Debian bookworm); `make STATIC_DEPS=PREFIX bin/sample-controller` then
# links the daemon against them, with only glibc left shared.
#
# Why: the shared build maps about 30 libraries (libcurl's Debian build pulls in
# LDAP, Kerberos, SSH, IDN, PSL, brotli, zstd and their dependencies; GnuTLS pulls in
# p11-kit, unistring, tasn1, nettle, hogweed, gmp, ffi). Each one costs resident pages
# in every process, relocated data and the code around what is called, before the
# daemon has done anything: 13.9 MiB idle against 7.5 MiB for this build (see
# bench/RESULTS.md, "The idle floor"). What is left out cannot be used by the daemon:
#   OpenSSL  TLS 1.2 and 1.3 only, ECDHE (P-256/384/521, X25519) with AES-GCM and
#            ChaCha20-Poly1305, RSA/ECDSA/Ed25519 keys and certificates; no engines,
#            modules, legacy ciphers, DTLS, DH/DSA/DES, CMS, OCSP, CT, SRP; no
#            openssl.cnf read at start (no-autoload-config); -Os.
#   libcurl  HTTP/1.1 and HTTP/2 (nghttp2) over OpenSSL, gzip (zlib), proxies and
#            basic auth (kubeconfig proxy-url, username/password); no other protocol,
#            no IDN/PSL/cookies/HSTS/alt-svc/netrc/NTLM/Kerberos.
#   GnuTLS   (libmicrohttpd's TLS, the metrics server) without p11-kit, IDN, TPM,
#            compression, SRP, anonymous auth, tools and documentation.
# Debian's static nettle, hogweed, gmp, tasn1, zlib, yajl, yaml, libev and
# libmicrohttpd are used as they are.
#
# The source of each package is the newest version the configured mirrors serve (a
# mirror may list a version in its index that it does not hold: the next is tried).
set -euo pipefail

PREFIX=${1:?usage: static-deps.sh PREFIX}
JOBS=${JOBS:-$(nproc)}
WORK=$(mktemp -d /tmp/static-deps.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
CFLAGS_TRIM="-Os -ffunction-sections -fdata-sections -fstack-protector-strong"
export CFLAGS="$CFLAGS_TRIM"

# deb-src entries beside every deb entry of the image's sources (one-line and deb822).
add_deb_src() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -f $f ]] || continue
		sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "$f" >>/etc/apt/sources.list.d/static-deps-src.list
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -f $f ]] || continue
		sed 's/^Types:[[:space:]]*deb[[:space:]]*$/Types: deb-src/' "$f" >"/etc/apt/sources.list.d/static-deps-src-$(basename "$f")"
	done
	apt-get update
}

# fetch PKG: PKG's source tree (Debian patches applied) in $WORK/PKG.
fetch() {
	local pkg=$1 v
	mkdir -p "$WORK/dl-$pkg"
	for v in $(apt-cache showsrc "$pkg" | awk '/^Version:/ { print $2 }' | sort -u | sort -rV); do
		if (cd "$WORK/dl-$pkg" && apt-get source --download-only "$pkg=$v"); then
			dpkg-source --no-check -x "$WORK/dl-$pkg/${pkg}_${v#*:}.dsc" "$WORK/$pkg"
			echo "static-deps: $pkg $v"
			echo "$pkg $v" >>"$PREFIX/VERSIONS"
			return 0
		fi
		rm -f "$WORK/dl-$pkg"/*
	done
	echo "static-deps: no source of $pkg could be fetched" >&2
	return 1
}

build_openssl() {
	cd "$WORK/openssl"
	# Configure's own -O3 comes first: the -Os in the options wins.
	./Configure linux-x86_64 --prefix="$PREFIX" --libdir=lib --openssldir=/etc/ssl \
		no-shared no-module no-engine no-legacy no-dso no-async no-autoload-config \
		no-ssl3 no-tls1 no-tls1_1 no-dtls no-srp no-comp no-ct no-ocsp no-cms no-ts \
		no-srtp no-sctp no-nextprotoneg no-rfc3779 no-ssl-trace no-ktls no-multiblock \
		no-idea no-rc2 no-rc4 no-rc5 no-md4 no-mdc2 no-whirlpool no-seed no-bf no-cast \
		no-camellia no-aria no-sm2 no-sm3 no-sm4 no-siphash no-scrypt no-gost no-ec2m \
		no-des no-dsa no-dh no-rmd160 no-blake2 no-siv no-ocb no-cmac no-cmp \
		no-ui-console no-tests no-filenames no-deprecated no-cached-fetch \
		$CFLAGS_TRIM
	make -j"$JOBS" build_libs
	make install_dev
}

build_nghttp2() {
	cd "$WORK/nghttp2"
	autoreconf -fi
	./configure --prefix="$PREFIX" --libdir="$PREFIX/lib" --enable-lib-only \
		--disable-shared --enable-static --with-pic
	make -j"$JOBS"
	make install
}

build_curl() {
	cd "$WORK/curl"
	autoreconf -fi
	PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig ./configure --prefix="$PREFIX" --libdir="$PREFIX/lib" \
		--disable-shared --enable-static --with-pic \
		--with-openssl="$PREFIX" --with-nghttp2="$PREFIX" --with-zlib \
		--with-ca-bundle=/etc/ssl/certs/ca-certificates.crt --with-ca-path=/etc/ssl/certs \
		--without-libidn2 --without-libpsl --without-brotli --without-zstd --without-librtmp \
		--without-libssh2 --without-libssh --without-libgsasl --without-gssapi --without-hyper \
		--without-msh3 --without-ngtcp2 --without-nghttp3 --without-quiche \
		--disable-ftp --disable-file --disable-ldap --disable-ldaps --disable-rtsp --disable-dict \
		--disable-telnet --disable-tftp --disable-pop3 --disable-imap --disable-smb --disable-smtp \
		--disable-gopher --disable-mqtt --disable-manual --disable-ntlm --disable-ntlm-wb \
		--disable-netrc --disable-alt-svc --disable-hsts --disable-cookies --disable-doh \
		--disable-unix-sockets --disable-dnsshuffle --disable-get-easy-options --disable-mime \
		--disable-tls-srp --disable-progress-meter
	make -j"$JOBS" -C lib
	make -C include install
	# Debian's patches name the library after a TLS flavour (libcurl-nss.la, ...):
	# whatever it is called, it is this build's only libcurl archive.
	local a
	a=$(find lib/.libs -maxdepth 1 -name 'libcurl*.a')
	[[ $(wc -l <<<"$a") == 1 && -n $a ]] || { echo "static-deps: libcurl archive: '$a'" >&2; return 1; }
	install -m 644 "$a" "$PREFIX/lib/libcurl.a"
}

build_gnutls() {
	cd "$WORK/gnutls28"
	./configure --prefix="$PREFIX" --libdir="$PREFIX/lib" --disable-shared --enable-static \
		--with-pic --without-p11-kit --without-idn --with-included-unistring --without-tpm \
		--without-tpm2 --without-zlib --without-brotli --without-zstd --disable-tools \
		--disable-doc --disable-manpages --disable-cxx --disable-nls --disable-tests \
		--disable-openssl-compatibility --disable-guile --disable-libdane \
		--disable-srp-authentication --disable-anon-authentication \
		--disable-heartbeat-support --disable-dtls-srtp-support --disable-gost \
		--disable-ssl3-support --disable-ssl2-support \
		--with-default-trust-store-file=/etc/ssl/certs/ca-certificates.crt
	# Only the library: gnulib first (lib/ needs it), then lib/ and its headers.
	make -j"$JOBS" -C gl
	make -j"$JOBS" -C lib
	make -C lib/includes install
	install -m 644 lib/.libs/libgnutls.a "$PREFIX/lib/libgnutls.a"
}

mkdir -p "$PREFIX"
: >"$PREFIX/VERSIONS"
add_deb_src
for p in openssl nghttp2 curl gnutls28; do fetch "$p"; done
(build_openssl)
(build_nghttp2)
(build_curl)
(build_gnutls)
cat "$PREFIX/VERSIONS"
