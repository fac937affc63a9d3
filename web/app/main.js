console.log("relay");
