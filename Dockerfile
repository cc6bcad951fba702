# Juru as a container: the Agent Runtime contract on 0.0.0.0:$PORT (8080), plus the rest of the
# API. SQLite on the /data volume by default; set JURU_DATABASE_URL for PostgreSQL.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY src ./src
RUN pip install -c constraints.txt . \
    && useradd --create-home --uid 10001 juru \
    && mkdir -p /data \
    && chown juru:juru /data \
    && rm -rf /src

USER juru
WORKDIR /home/juru
ENV PORT=8080 \
    JURU_RUNTIME_ENABLED=true \
    JURU_DATABASE_URL=sqlite:////data/juru.db
VOLUME /data
EXPOSE 8080

# uvicorn runs the app's startup (migrations, checkpointer, agent check) before it binds the
# port, so the platform's first connection reaches a ready server.
CMD ["juru", "serve", "--host", "0.0.0.0"]
