# sluice/frontend: the static sluice-frontend binary (CGO_ENABLED=0) on an empty image.
# Build with `make images`, which compiles the binary into bin/docker first.
FROM scratch
COPY bin/docker/sluice-frontend /sluice-frontend
ENV SLUICE_ADMIN_ADDR=0.0.0.0:8081 SLUICE_HTTP_ADDR=0.0.0.0:8080 SLUICE_KAFKA_ADDR=0.0.0.0:9092 SLUICE_LOG_FORMAT=json
EXPOSE 8080 8081 9092
HEALTHCHECK --interval=2s --timeout=3s --start-period=5s --retries=3 CMD ["/sluice-frontend", "healthcheck"]
ENTRYPOINT ["/sluice-frontend"]
