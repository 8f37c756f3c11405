# sluice/storage: the static sluice-storage binary (CGO_ENABLED=0) on an empty image.
# Build with `make images`, which compiles the binary into bin/docker first.
FROM scratch
COPY bin/docker/sluice-storage /sluice-storage
ENV SLUICE_ADMIN_ADDR=0.0.0.0:9111 SLUICE_ADDR=0.0.0.0:9101 SLUICE_KAFKA_ADDR=0.0.0.0:9121 SLUICE_DATA_DIR=/data SLUICE_LOG_FORMAT=json
EXPOSE 9101 9111 9121
HEALTHCHECK --interval=2s --timeout=3s --start-period=5s --retries=3 CMD ["/sluice-storage", "healthcheck"]
ENTRYPOINT ["/sluice-storage"]
