# zonal container image: the custom NGINX (with ngx_http_zonal_module compiled
# in) and the zonal binary, running as a non-root user.
#
# The builder runs the very scripts CI runs (build/nginx.sh installs its
# Debian build dependencies and fetches the pinned, checksummed NGINX source),
# so the image and the tests use the same NGINX build.

ARG GO_VERSION=1.26
ARG DEBIAN_RELEASE=bookworm

FROM golang:${GO_VERSION}-${DEBIAN_RELEASE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN rm -rf bin .cache \
 && build/nginx.sh \
 && CGO_ENABLED=1 go build -trimpath -ldflags "-s -w" -o bin/zonal ./cmd/zonal

FROM debian:${DEBIAN_RELEASE}-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates libpcre2-8-0 libssl3 zlib1g libcap2-bin \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10101 zonal \
 && useradd --system --uid 10101 --gid zonal --home-dir /var/lib/zonal \
      --shell /usr/sbin/nologin zonal \
 && mkdir -p /var/lib/zonal /run/zonal \
 && chown zonal:zonal /var/lib/zonal /run/zonal
COPY --from=build /src/bin/nginx /src/bin/zonal /usr/local/bin/
# Ports 80 and 443 without root.
RUN setcap cap_net_bind_service=+ep /usr/local/bin/nginx \
 && apt-get purge -y libcap2-bin && apt-get autoremove -y
USER 10101:10101
WORKDIR /var/lib/zonal
ENTRYPOINT ["/usr/local/bin/zonal"]
CMD ["--help"]
