//! `ObjectStoreSink`: records to S3, GCS or Azure as Parquet or JSON-lines
//! files.
