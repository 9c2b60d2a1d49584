// Starts an embedded Neo4j Community DBMS with its Bolt server, for the test suite only.
//
//   java -cp 'lib/*' Launcher.java <home-dir> [setting=value ...]
//
// The settings are written to <home-dir>/neo4j.conf and loaded (the builder has no raw
// string API). Prints "NEO4J-READY" on stdout once Bolt accepts connections and shuts the
// DBMS down cleanly when stdin closes, so the parent process only has to close the pipe.
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;

public class Launcher {
    public static void main(String[] args) throws Exception {
        Path home = Path.of(args[0]).toAbsolutePath();
        Files.createDirectories(home);
        List<String> lines = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            lines.add(args[i]);
        }
        Path conf = home.resolve("neo4j.conf");
        Files.write(conf, lines, StandardCharsets.UTF_8);

        DatabaseManagementService dbms =
                new DatabaseManagementServiceBuilder(home).loadPropertiesFromFile(conf).build();
        Runtime.getRuntime().addShutdownHook(new Thread(dbms::shutdown));
        System.out.println("NEO4J-READY");
        System.out.flush();

        InputStream in = System.in;
        byte[] buffer = new byte[256];
        while (in.read(buffer) >= 0) {
            // Wait for EOF: the parent closed our stdin or exited.
        }
        dbms.shutdown();
        System.exit(0);
    }
}
