# A zkcoord coordinator node (or any other zkcoord command).
#   docker build -t zkcoord .
#   docker compose up -d        # 3 ZooKeeper servers + 3 coordinator nodes sharing one log volume
FROM python:3.11-slim
WORKDIR /opt/zkcoord
COPY setup.cfg pyproject.toml README.md ./
COPY zkcoord ./zkcoord
COPY migrations ./migrations
RUN pip install --no-cache-dir .
RUN useradd --system --uid 1000 zkcoord && mkdir -p /var/lib/zkcoord && chown zkcoord /var/lib/zkcoord
USER zkcoord
ENTRYPOINT ["zkcoord"]
CMD ["--help"]
