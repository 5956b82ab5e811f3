# Multi-stage build of the C sample-controller. Untested here (no Docker engine on
# the development machines); the same steps run in `make`.
FROM debian:bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential pkg-config libcurl4-openssl-dev libyajl-dev libyaml-dev \
      libev-dev libmicrohttpd-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN make bin/sample-controller

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      libcurl4 libyajl2 libyaml-0-2 libev4 libmicrohttpd12 ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/bin/sample-controller /usr/local/bin/sample-controller
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/sample-controller"]
