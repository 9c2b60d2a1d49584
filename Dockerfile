# syntax=docker/dockerfile:1
# Smriti's team server: `smriti serve --transport http` on port 8765, API keys on, the
# stores and keys in the /data volume (docs/team.md, compose.yaml).
#
# It installs from a wheelhouse, never from an index: the wheels built from this
# repository plus their dependencies for the target platform, made by
#     python release/wheelhouse.py            # into wheelhouse/
#     docker build -t smriti .
# so the build needs no network and installs exactly what was checked.

ARG PYTHON_IMAGE=docker.io/library/python:3.13-slim-trixie

FROM ${PYTHON_IMAGE} AS install
COPY wheelhouse/ /wheelhouse/
# Server backends and the S3 backup; LadybugDB/Kùzu and the local model come with the base.
ARG EXTRAS=neo4j,falkor,s3
RUN python3 -m venv /opt/smriti \
    && /opt/smriti/bin/python -m pip install --no-cache-dir --no-index \
        --find-links /wheelhouse "smriti-server[${EXTRAS}]" \
    && /opt/smriti/bin/smriti --version

FROM ${PYTHON_IMAGE}
# The MCP Registry's proof that this image belongs to the server of server.json.
LABEL io.modelcontextprotocol.server.name="io.github.smriti-memory/smriti" \
      org.opencontainers.image.title="Smriti team server" \
      org.opencontainers.image.licenses="MIT"
RUN groupadd --system --gid 10001 smriti \
    && useradd --system --uid 10001 --gid 10001 --home-dir /data --shell /usr/sbin/nologin smriti \
    && mkdir /data && chown 10001:10001 /data
COPY --from=install /opt/smriti /opt/smriti
COPY deploy/healthcheck.py /opt/smriti/healthcheck.py
ENV PATH=/opt/smriti/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    HOME=/data \
    STORAGE_LOCATION=/data \
    SMRITI_AUTH=keys \
    SMRITI_PORT=8765
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8765
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python3", "/opt/smriti/healthcheck.py"]
# `docker run IMAGE keys create alice` (or any smriti command) replaces the CMD.
ENTRYPOINT ["smriti"]
CMD ["serve", "--transport", "http", "--host", "0.0.0.0", "--port", "8765"]
