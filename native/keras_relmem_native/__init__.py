"""keras-relmem's native gRPC front end (`relmem-serve --grpc_native=true`); see docs/serving.md."""
